#!/bin/sh
# torch_tests.sh DIR: make DIR/test_dataloader.py PyTorch's own (Debian's source
# of the installed python3-torch, upstream's test/ directory), fetching it when
# absent; print DIR. make test-torch-suite runs it, then tests/python/torch_suite.py.
#
# The source comes from `apt-get source --download-only pytorch=VERSION` with a
# private apt state (a deb-src line for bookworm in DIR/../apt, its own lists:
# the machine's sources are not touched). Only the upstream tarball is used, its
# test/test_dataloader.py unpacked with tar (Debian's patches are not applied:
# the file is upstream's 1.13.1, as torch's CI ran it), so a mirror that refuses
# the .debian.tar.xz does not matter. Nothing is fetched when DIR already holds
# the file. Fetching costs about 2 s and 28 MB here (the source index and the
# 18 MB tarball), 4 s in all.
set -eu
dir=${1:?usage: tests/torch_tests.sh DIR}
if [ -f "$dir/test_dataloader.py" ]; then
	echo "$dir"
	exit 0
fi
py=${GM_PYTHON:-/usr/bin/python3}
version=$(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null || true)
if [ -z "$version" ]; then
	echo "torch_tests.sh: python3-torch is not installed: its version names the source to fetch (apt-get install python3-torch)" >&2
	exit 1
fi
upstream=${version%-*}          # 1.13.1+dfsg
upstream_plain=${upstream%+*}   # 1.13.1
work=$(dirname "$dir")/torch-src-fetch
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/src"
echo "torch_tests.sh: $dir has no test_dataloader.py: fetching Debian's pytorch $version source into $work" >&2
suite=${GM_TORCH_SUITE_DIST:-bookworm}
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
	>"$work/apt/sources.list"
set -- -o Dir::Etc::SourceList="$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
	-o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache" -o Debug::NoLocking=1
apt-get -qq "$@" update
# (the .debian.tar.xz may be refused by a mirror: the orig tarball is what counts)
(cd "$work/src" && apt-get -qq "$@" source --download-only "pytorch=$version" >/dev/null 2>&1) || true
orig=
for f in "$work/src/pytorch_$upstream.orig.tar."*; do
	[ -f "$f" ] && orig=$f
done
if [ -z "$orig" ]; then
	echo "torch_tests.sh: apt-get source pytorch=$version fetched no pytorch_$upstream.orig.tar.* into $work/src (is deb.debian.org reachable? GM_TORCH_SUITE_DIST names the suite, now $suite)" >&2
	exit 1
fi
mkdir -p "$work/unpacked"
tar --no-same-owner -xf "$orig" -C "$work/unpacked" "pytorch-$upstream_plain/test/test_dataloader.py"
mkdir -p "$dir"
mv "$work/unpacked/pytorch-$upstream_plain/test/test_dataloader.py" "$dir/"
rm -rf "$work"
"$py" -c 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], "exec")' "$dir/test_dataloader.py"
echo "$dir"
