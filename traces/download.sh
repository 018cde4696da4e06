#!/bin/sh
# download.sh - fetch the public GPU-cluster traces the simulator reads into
# traces/public/ (or $1), with the same layout as the project's shared copy, and
# check their sha256. For users; the project never commits these files.
#
#   alibaba-gpu-v2023/  Alibaba "openb" trace (FGD, USENIX ATC'23), from
#                       github.com/alibaba/clusterdata cluster-trace-gpu-v2023/csv.
#                       Terms: research/study use; cite the ATC'23 paper.
#   alibaba-gpu-v2020/  PAI machine list (MLaaS in the Wild, NSDI'22), CC BY 4.0,
#                       from github.com/qzweng/clusterdata-cluster-trace-gpu-v2020-data.
#   philly-pollux/      Microsoft Philly jobs as processed by Pollux (OSDI'21),
#                       CC BY 4.0, from github.com/petuum/adaptdl (osdi21-artifact).
#
# Usage: sh traces/download.sh [DIR]     (needs curl or wget, tar, sha256sum)
set -e
DIR=${1:-$(dirname "$0")/public}
OPENB_URL=${OPENB_URL:-https://raw.githubusercontent.com/alibaba/clusterdata/7a6c496e4f4b6ce6150be8f881cb051bf2abff42/cluster-trace-gpu-v2023/csv}
PHILLY_URL=${PHILLY_URL:-https://raw.githubusercontent.com/petuum/adaptdl/osdi21-artifact/simulator/traces/philly.csv}
# The path inside that repository is not verified by the project: override PAI_URL
# if it moved (the archive must contain pai_machine_spec.csv).
PAI_URL=${PAI_URL:-https://raw.githubusercontent.com/qzweng/clusterdata-cluster-trace-gpu-v2020-data/main/pai_machine_spec.tar.gz}

fetch() { # fetch URL FILE
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --retry 3 -o "$2" "$1"
	else
		wget -q -O "$2" "$1"
	fi
}

mkdir -p "$DIR/alibaba-gpu-v2023" "$DIR/alibaba-gpu-v2020" "$DIR/philly-pollux"
for f in openb_node_list_all_node.csv openb_node_list_gpu_node.csv openb_pod_list_default.csv \
	openb_pod_list_cpu050.csv openb_pod_list_gpushare40.csv openb_pod_list_gpuspec10.csv \
	openb_pod_list_multigpu20.csv README.md; do
	echo "fetching alibaba-gpu-v2023/$f"
	fetch "$OPENB_URL/$f" "$DIR/alibaba-gpu-v2023/$f"
done
echo "fetching philly-pollux/philly.csv"
fetch "$PHILLY_URL" "$DIR/philly-pollux/philly.csv"
echo "fetching alibaba-gpu-v2020/pai_machine_spec.tar.gz"
if fetch "$PAI_URL" "$DIR/alibaba-gpu-v2020/pai_machine_spec.tar.gz"; then
	tar -xzf "$DIR/alibaba-gpu-v2020/pai_machine_spec.tar.gz" -C "$DIR/alibaba-gpu-v2020"
	printf 'machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n' >"$DIR/alibaba-gpu-v2020/pai_machine_spec.header"
else
	echo "download.sh: could not fetch $PAI_URL; set PAI_URL (the PAI list is optional)" >&2
fi

# sha256 of the files as the project tested them
cd "$DIR"
sha256sum -c --ignore-missing <<'SUMS'
747f43247bffc2b0bb081d7f61f0705ca8d390dafc0b647e642c92f3baf3ba1e  ./alibaba-gpu-v2023/openb_pod_list_cpu050.csv
1ee7ed79c27a3b0861cda8ddba86a004c6aba904caafa329a76ae93ca63834a8  ./alibaba-gpu-v2023/openb_pod_list_default.csv
2dc7e4cb9480484f08539720b433a9ec9ab5d76b396f3f7557c53a2ff78a7611  ./alibaba-gpu-v2023/openb_pod_list_gpuspec10.csv
2beca64b4d3dfa342036a34b56a495c6cef9225db836c81f541282cb1df320b5  ./alibaba-gpu-v2023/openb_node_list_gpu_node.csv
d83ce79a4eb6987524bedbb0c65e41aed3a36bf6c1b78b86234c3687a07e1d40  ./alibaba-gpu-v2023/openb_pod_list_gpushare40.csv
d9ec6f6c74fb980cc0b81239470c6353fceea077ea9abd610003b604c7cc2b01  ./alibaba-gpu-v2023/openb_pod_list_multigpu20.csv
5a85c2af79c66a1efff8bbcbda430400aae56d8431370d738480967e1a9c6b15  ./alibaba-gpu-v2023/openb_node_list_all_node.csv
251e9e33649155a6a935fdc1dc0e90cd4698206936b60bd8fce60ff2ccd51439  ./alibaba-gpu-v2020/pai_machine_spec.csv
ebffb3dd1589bdf4e7bcd74496201c5ded1d557d498ee14f560463f37ec353da  ./philly-pollux/philly.csv
SUMS
echo "traces in $DIR; run: TRACES=$DIR make sim-experiments"
