#!/bin/sh
# mkman.sh - write the goldminer(1) man page on stdout from the binary's own help
# (goldminer --help and goldminer COMMAND --help), so that the two never disagree.
#     sh cmd/mkman.sh build/goldminer > build/goldminer.1
set -eu
G=${1:?usage: mkman.sh GOLDMINER_BINARY}
ver=$("$G" --version | sed 's/^goldminer //')
# roff-escape help text: backslashes, and lines starting with . or '
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
cat <<HEAD
.TH GOLDMINER 1 "" "goldminer $ver" "User Commands"
.SH NAME
goldminer \\- feed GPUs: stateless JPEG data workers, shared-memory rings, and a cluster simulator
.SH SYNOPSIS
.B goldminer
.I COMMAND
.RI [ ARGS ...]
.br
.B goldminer help
.I COMMAND
.br
.B goldminer \\-\\-version
.SH DESCRIPTION
goldminer runs the data pre-processing of deep-learning training (read, decode,
augment, batch) in stateless worker processes fed by io_uring, which decode JPEGs
with libjpeg-turbo and write finished batches into a shared-memory ring that the
trainer pins for GPU DMA. A discrete-event simulator replays cluster traces to
evaluate the same elastic allocation policy at scale.
Exit status: 0 ok, 1 runtime error, 2 usage error.
.SH COMMANDS
.nf
HEAD
"$G" --help | sed -n '3,$p' | esc
echo ".fi"
for c in $("$G" --help | sed -n 's/^  \([a-z]*\) .*/\1/p'); do
	echo ".SS goldminer $c"
	echo ".nf"
	"$G" "$c" --help 2>&1 | esc || true
	echo ".fi"
done
cat <<'TAIL'
.SH FILES
.TP
.I $XDG_RUNTIME_DIR/goldminer/goldminer.sock
the node agent's socket (goldminer node; see --socket)
.SH SEE ALSO
The README and docs/DESIGN.md of the source tree; the C API in
.IR <goldminer/loader.h> ;
pkg-config \-\-cflags \-\-libs goldminer.
TAIL
