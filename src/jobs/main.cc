// manta_job_supervisor: see supervisor_main.cc.
#include "src/jobs/supervisor_main.h"

int main(int argc, char** argv) { return manta::jobs::SupervisorMain(argc, argv); }
