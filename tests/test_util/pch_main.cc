// The target that compiles test_util/pch.h once, with the flags of a test executable
// (-fPIE, unlike the static test_util library), for every test to reuse.
int main() { return 0; }
