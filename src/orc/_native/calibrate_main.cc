// orc_calibrate: measures the kernel variants this CPU runs (see Calibrate
// in calibrate.cc) and writes the fastest as a spec, their times as comments,
// to the file named on the command line (standard output without one). The
// build runs it once and installs the file next to the module as
// calibration.txt; orc._native loads it at import.
#include <cstdio>
#include <string>

#include "orc_native.h"

int main(int argc, char** argv) {
  const std::string text = orc_native::Calibrate();
  FILE* out = argc > 1 ? std::fopen(argv[1], "w") : stdout;
  if (out == nullptr) {
    std::perror(argv[1]);
    return 1;
  }
  const bool ok = std::fputs(text.c_str(), out) >= 0;
  if (out != stdout && std::fclose(out) != 0) return 1;
  return ok ? 0 : 1;
}
