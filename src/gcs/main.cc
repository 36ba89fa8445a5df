// manta_gcs: see gcs_main.cc.
#include "src/gcs/gcs_main.h"

int main(int argc, char** argv) { return manta::gcs::GcsMain(argc, argv); }
