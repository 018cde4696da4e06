/* TEMPORARY during the redesign: forwards to commands still inside the library. */
#include "cmd.h"
#include "goldminer/cli.h"
int gm_cmd_bench(int argc, char **argv) { return gm_cli_bench(argc, argv); }
int gm_cmd_pack(int argc, char **argv) { return gm_cli_pack(argc, argv); }
int gm_cmd_plan(int argc, char **argv) { return gm_cli_plan(argc, argv); }
int gm_cmd_profile(int argc, char **argv) { return gm_cli_profile(argc, argv); }
int gm_cmd_sim(int argc, char **argv) { return gm_cli_sim(argc, argv); }
int gm_cmd_synth(int argc, char **argv) { return gm_cli_synth(argc, argv); }
