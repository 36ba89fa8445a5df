// manta_dashboard: see dashboard_main.cc.
#include "src/dashboard/dashboard_main.h"

int main(int argc, char** argv) { return manta::dashboard::DashboardMain(argc, argv); }
