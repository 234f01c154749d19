// dlock: the command-line client of dlockd. Everything but main() lives in src/cli.

#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) { return dlock::cli::run_cli(argc, argv, std::cout, std::cerr); }
