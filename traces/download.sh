#!/bin/sh
# download.sh - put the public GPU-cluster traces the simulator reads into
# traces/public/ (or DIR), with the layout `make sim-experiments` expects, and
# verify every file against traces/SHA256SUMS. The project never commits them.
#
#   alibaba-gpu-v2023/  Alibaba "openb" trace (FGD, USENIX ATC'23), from
#                       github.com/alibaba/clusterdata cluster-trace-gpu-v2023/csv.
#                       Terms: research/study use; cite the ATC'23 paper.
#   alibaba-gpu-v2020/  PAI machine list (MLaaS in the Wild, NSDI'22), CC BY 4.0,
#                       from github.com/qzweng/clusterdata-cluster-trace-gpu-v2020-data.
#   philly-pollux/      Microsoft Philly jobs as processed by Pollux (OSDI'21),
#                       CC BY 4.0, from github.com/petuum/adaptdl (osdi21-artifact).
#
# Usage: sh traces/download.sh [--from MIRROR] [DIR]
#   --from MIRROR   copy from a local mirror with the same layout (a shared file
#                   system, an earlier download) instead of the network
#   DIR             destination (default traces/public beside this script)
# Needs sha256sum, and curl or wget (network only), tar (PAI list from the network).
# Every file listed in SHA256SUMS must arrive and match: a missing or different
# file is named, removed from DIR, and the exit status is 1. Files already in DIR
# that match are kept (a re-run only fetches what is missing or wrong).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
SUMS="$here/SHA256SUMS"
FROM=""
DIR=""
while [ $# -gt 0 ]; do
	case $1 in
	--from) [ $# -ge 2 ] || { echo "download.sh: --from needs a directory" >&2; exit 2; }
		FROM=$2; shift 2 ;;
	--from=*) FROM=${1#--from=}; shift ;;
	-h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "download.sh: unknown option '$1' (--from MIRROR, DIR)" >&2; exit 2 ;;
	*) [ -z "$DIR" ] || { echo "download.sh: one DIR only" >&2; exit 2; }
		DIR=$1; shift ;;
	esac
done
DIR=${DIR:-$here/public}
if [ -n "$FROM" ] && [ ! -d "$FROM" ]; then
	echo "download.sh: --from $FROM: not a directory" >&2
	exit 2
fi
OPENB_URL=${OPENB_URL:-https://raw.githubusercontent.com/alibaba/clusterdata/7a6c496e4f4b6ce6150be8f881cb051bf2abff42/cluster-trace-gpu-v2023/csv}
PHILLY_URL=${PHILLY_URL:-https://raw.githubusercontent.com/petuum/adaptdl/osdi21-artifact/simulator/traces/philly.csv}
# The path inside that repository is not verified by the project: override PAI_URL
# if it moved (the archive must contain pai_machine_spec.csv).
PAI_URL=${PAI_URL:-https://raw.githubusercontent.com/qzweng/clusterdata-cluster-trace-gpu-v2020-data/main/pai_machine_spec.tar.gz}

fetch() { # fetch URL FILE
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --retry 3 -o "$2" "$1"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -O "$2" "$1"
	else
		echo "download.sh: neither curl nor wget is installed (or use --from MIRROR)" >&2
		return 1
	fi
}

# ok REL: the file DIR/REL is present with the sha256 SHA256SUMS gives it
ok() {
	want=$(awk -v p="./$1" '$2 == p { print $1 }' "$SUMS")
	[ -f "$DIR/$1" ] && [ "$(sha256sum <"$DIR/$1" | cut -d' ' -f1)" = "$want" ]
}

# get REL: copy or download one listed file into DIR
get() {
	rel=$1
	mkdir -p "$DIR/$(dirname "$rel")"
	if [ -n "$FROM" ]; then
		[ -f "$FROM/$rel" ] || { echo "download.sh: $FROM/$rel: missing in the mirror" >&2; return 1; }
		cp "$FROM/$rel" "$DIR/$rel.part" && mv "$DIR/$rel.part" "$DIR/$rel"
		return
	fi
	case $rel in
	alibaba-gpu-v2023/*) fetch "$OPENB_URL/${rel#alibaba-gpu-v2023/}" "$DIR/$rel.part" ;;
	philly-pollux/philly.csv) fetch "$PHILLY_URL" "$DIR/$rel.part" ;;
	alibaba-gpu-v2020/pai_machine_spec.csv)
		fetch "$PAI_URL" "$DIR/alibaba-gpu-v2020/pai_machine_spec.tar.gz" &&
			tar -xzf "$DIR/alibaba-gpu-v2020/pai_machine_spec.tar.gz" \
				-C "$DIR/alibaba-gpu-v2020" pai_machine_spec.csv &&
			mv "$DIR/$rel" "$DIR/$rel.part" ;;
	*) echo "download.sh: no source known for $rel" >&2; return 1 ;;
	esac && mv "$DIR/$rel.part" "$DIR/$rel"
}

bad=0
while read -r _ rel; do
	rel=${rel#./}
	if ok "$rel"; then
		echo "ok      $rel (already here)"
		continue
	fi
	if [ -n "$FROM" ]; then echo "copying $rel from $FROM"; else echo "fetching $rel"; fi
	if ! get "$rel"; then
		rm -f "$DIR/$rel" "$DIR/$rel.part"
		bad=$((bad + 1))
	elif ! ok "$rel"; then
		echo "download.sh: $DIR/$rel: sha256 differs from traces/SHA256SUMS (corrupt or" \
			"changed upstream); removed" >&2
		rm -f "$DIR/$rel"
		bad=$((bad + 1))
	fi
done <"$SUMS"
# The PAI list has no header row; its columns, as the simulator reads them.
if [ -f "$DIR/alibaba-gpu-v2020/pai_machine_spec.csv" ]; then
	printf 'machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n' >"$DIR/alibaba-gpu-v2020/pai_machine_spec.header"
fi
if [ "$bad" -gt 0 ]; then
	echo "download.sh: $bad file(s) missing or wrong in $DIR (see above)" >&2
	exit 1
fi
echo "traces verified in $DIR ($(wc -l <"$SUMS") files); run: make sim-experiments"
