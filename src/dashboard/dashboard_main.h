// manta_dashboard's main (the program is main.cc, calling this): its flags, then the daemon.
// In the library, compiled with its sources, so that the program's own file is tiny.
#pragma once

namespace manta::dashboard {

int DashboardMain(int argc, char** argv);

}  // namespace manta::dashboard
