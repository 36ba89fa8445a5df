// manta_raylet: see raylet_main.cc.
#include "src/raylet/raylet_main.h"

int main(int argc, char** argv) { return manta::raylet::RayletMain(argc, argv); }
