/*
 * cli.h - subcommands of the `goldminer` command. Each returns the process exit
 * status (0 ok, 1 runtime error, 2 usage error) and prints its own errors.
 */
#ifndef GOLDMINER_CLI_H
#define GOLDMINER_CLI_H

int gm_cli_node(int argc, char **argv);  /* core/node.c */

#endif
