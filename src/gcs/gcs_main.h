// manta_gcs's main (the program is main.cc, calling this): its flags, then the daemon.
// In the library, compiled with its sources, so that the program's own file is tiny.
#pragma once

namespace manta::gcs {

int GcsMain(int argc, char** argv);

}  // namespace manta::gcs
