/*
 * cli.h - subcommands of the `goldminer` command. Each returns the process exit
 * status (0 ok, 1 runtime error, 2 usage error) and prints its own errors.
 */
#ifndef GOLDMINER_CLI_H
#define GOLDMINER_CLI_H

int gm_cli_synth(int argc, char **argv); /* core/synth.c */
int gm_cli_bench(int argc, char **argv); /* core/bench.c */
int gm_cli_sim(int argc, char **argv);   /* sim/sim_cli.c */
int gm_cli_plan(int argc, char **argv);  /* core/pipeline.c */
int gm_cli_pack(int argc, char **argv);  /* core/pack.c */
int gm_cli_profile(int argc, char **argv); /* core/measure.c */

#endif
