// manta_autoscaler: see autoscaler_main.cc.
#include "src/autoscaler/autoscaler_main.h"

int main(int argc, char** argv) { return manta::autoscaler::AutoscalerMain(argc, argv); }
