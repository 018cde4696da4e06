/* TEMPORARY during the redesign: forwards to commands still inside the library. */
#include "cmd.h"
#include "goldminer/cli.h"
int gm_cmd_node(int argc, char **argv) { return gm_cli_node(argc, argv); }
