/*
 * fuzz.h - shared bits of the fuzz targets in tests/fuzz/.
 *
 * Each fuzz_*.c defines LLVMFuzzerTestOneInput(). Built two ways:
 *   make fuzz        clang -fsanitize=fuzzer,address,undefined: libFuzzer explores
 *                    for FUZZ_SECONDS per target, from tests/fuzz/corpus/<target>/
 *   make test        linked with replay.c: every corpus file goes through the
 *                    target once (regression; under make sanitize with ASan+UBSan)
 * A target must never crash, leak or read out of bounds on any input; a "bad
 * input" return code with a message is the expected outcome for garbage.
 */
#ifndef GOLDMINER_FUZZ_H
#define GOLDMINER_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Write data into an anonymous memfd and return "/proc/self/fd/N" in path
 * (the readers take paths). Returns the fd (close it after use) or -1. */
int gm_fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t pathlen);

/* A message must be non-empty, NUL-terminated within its buffer, and printable. */
void gm_fuzz_check_msg(const char *msg, size_t cap);

#endif
