# manta_test_temp_dir(<name> <out_var>): the MANTA_TEMP_DIR a test that starts a
# cluster should use: its own folder, so tests running in parallel (and several build
# trees on one machine) never share /tmp/manta-<uid> or each other's sessions.
#
# It is in /tmp, not in the build tree: the raylet puts its object-store Unix socket
# in <MANTA_TEMP_DIR>/private/<pid>-<n>/sessions/session_<ms>_<pid>_<hex>/store.sock,
# about 80 characters below MANTA_TEMP_DIR, and a socket path has at most 107, which
# leaves about 25 for MANTA_TEMP_DIR itself. So: /tmp/mt-<hash of the build dir>/<name>,
# with <name> of a few characters.
function(manta_test_temp_dir name out_var)
  string(MD5 hash "${PROJECT_BINARY_DIR}")
  string(SUBSTRING "${hash}" 0 6 hash)
  set(${out_var} "/tmp/mt-${hash}/${name}" PARENT_SCOPE)
endfunction()
