#!/usr/bin/env bash
# ctest python.package: installs the package (pip install of python/, which
# copies the libgrove.so this build made; nothing is compiled) into a venv
# under TEST_TMP and runs its pytest suite. The venv sees the system's
# site-packages and pip-installs by name only what is missing (numpy,
# pytest, setuptools, wheel); it is kept between runs. Exits 77 (ctest:
# skipped) with the reason when python3, its venv module or those packages
# cannot be had.
set -euo pipefail
: "${SOURCE_DIR:?}" "${GROVE_BUILD_DIR:?}" "${TEST_TMP:?}"
skip() { echo "SKIPPED: $*"; exit 77; }

command -v python3 >/dev/null || skip "python3 is not installed"
python3 -c 'import venv, ensurepip' 2>/dev/null || skip "python3 has no venv/ensurepip module (apt-get install python3-venv)"
[ -f "$GROVE_BUILD_DIR/libgrove.so" ] || skip "no $GROVE_BUILD_DIR/libgrove.so (configure with -DGROVE_BUILD_SHARED=ON)"

mkdir -p "$TEST_TMP"
venv="$TEST_TMP/venv"
if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv --system-site-packages "$venv" || skip "python3 -m venv failed"
fi
py="$venv/bin/python"
missing=()
for module in numpy pytest setuptools wheel; do
  "$py" -c "import $module" 2>/dev/null || missing+=("$module")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "python: pip install ${missing[*]}"
  "$py" -m pip install -q --disable-pip-version-check "${missing[@]}" ||
    skip "pip could not install ${missing[*]} (no network?)"
fi

# Install from a copy, so the build leaves nothing in the source tree.
rm -rf "$TEST_TMP/src"
mkdir -p "$TEST_TMP/src"
cp -r "$SOURCE_DIR/python/grove" "$SOURCE_DIR/python/pyproject.toml" "$SOURCE_DIR/python/setup.py" "$TEST_TMP/src/"
rm -f "$TEST_TMP/src/grove/libgrove.so"
GROVE_BUILD_DIR="$GROVE_BUILD_DIR" "$py" -m pip install -q --disable-pip-version-check --no-deps \
  --no-build-isolation --force-reinstall "$TEST_TMP/src"

# Run from TEST_TMP so `import grove` is the installed package, not python/grove.
cd "$TEST_TMP"
unset GROVE_LIBRARY
export GROVE_EXPECT_INSTALLED=1
exec "$py" -m pytest -q -p no:cacheprovider --basetemp="$TEST_TMP/pytest" "$SOURCE_DIR/python/tests" "$@"
