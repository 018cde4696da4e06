#!/bin/sh
# The Python package installs like one: `pip install ./python` into a venv made
# with --system-site-packages (Debian's torch stays visible), offline
# (--no-index --no-build-isolation); from outside the source tree the installed
# package runs one epoch (python3 -m goldminer bench) with the library named by
# GOLDMINER_LIB, and without any library it says where it looked. TAP on stdout.
# Env: B (build dir). Needs Debian's python3-venv, python3-setuptools and
# python3-wheel (make deps installs them); skips with the reason without.
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0
fails=0
t() { # t STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
if [ ! -x "$py" ] || ! "$py" -c 'import ensurepip, setuptools, wheel' 2>/dev/null; then
	echo "ok 1 # SKIP $py lacks venv/ensurepip, setuptools or wheel (python3-venv python3-setuptools python3-wheel)"
	echo "1..1"
	exit 0
fi
if readelf -d "$B/libgoldminer.so" 2>/dev/null | grep -q libasan; then
	echo "ok 1 # SKIP a sanitizer build cannot be loaded by an uninstrumented python (test_python.sh covers it)"
	echo "1..1"
	exit 0
fi
"$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/log" 2>&1
t $? "python3 -m venv --system-site-packages"
# PYTHONPATH could carry the source tree's python/ (or hidden modules): not here.
# from a copy without the build outputs an earlier install left (python/build
# would hand a package file the package list no longer names)
mkdir "$tmp/src" && cp -R "$repo/python/README.md" "$repo/python/pyproject.toml" \
	"$repo/python/goldminer" "$tmp/src/" && find "$tmp/src" -name __pycache__ -prune -exec rm -rf {} +
env -u PYTHONPATH "$tmp/venv/bin/pip" install -q --no-index --no-build-isolation \
	--disable-pip-version-check "$tmp/src" >>"$tmp/log" 2>&1
rc=$?
t $rc "pip install --no-index --no-build-isolation ./python"
[ $rc = 0 ] || sed 's/^/# /' "$tmp/log" | tail -20
"$B/goldminer" synth "$tmp/set" --images 48 --classes 3 >/dev/null 2>&1
cd "$tmp" || exit 1
where=$(env -u PYTHONPATH "$tmp/venv/bin/python" -c 'import goldminer, os; print(os.path.dirname(goldminer.__file__))' 2>&1)
t "$(case $where in "$tmp/venv"/*) echo 0 ;; *) echo 1 ;; esac)" "the venv imports the installed package ($where)"
out=$(env -u PYTHONPATH GOLDMINER_LIB="$B/libgoldminer.so" "$tmp/venv/bin/python" -m goldminer bench \
	"$tmp/set" --epochs 1 --batch 16 --workers 2 --plain 2>"$tmp/err")
rc=$?
t "$([ $rc = 0 ] && echo "$out" | grep -q '"images": *48'; echo $?)" \
	"python3 -m goldminer bench runs one epoch (48 images) from the venv"
[ $rc = 0 ] || sed 's/^/# /' "$tmp/err" | tail -5
err=$(env -u PYTHONPATH GOLDMINER_LIB="$tmp/none/libgoldminer.so" "$tmp/venv/bin/python" -m goldminer \
	library 2>&1)
t "$(echo "$err" | grep -q "tried, in order: $tmp/none/libgoldminer.so: not found"; echo $?)" \
	"without a library, the error names where it looked"
echo "1..$n"
[ "$fails" = 0 ]
