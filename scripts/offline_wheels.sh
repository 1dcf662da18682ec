# Sourced by the GPU-machine scripts (gpu_integrations.sh, gpu_dropin_clients.sh): installs the
# carried wheels whose module the machine's Python lacks, offline, into a scratch --target folder.
#   install_missing_wheels PY WHEELS_DIR SITE LOG [SKIP_DIST...]
# Logs "have <module> <version>" for each module already there and what it installs; returns
# non-zero (after printing the log's tail) when pip fails, 2 when WHEELS_DIR holds no wheel.

# The import name of a wheel's distribution (its file name's first field).
module_of() {
  case ${1,,} in
    pillow) echo PIL ;;
    *) echo "${1//-/_}" ;;
  esac
}

install_missing_wheels() {
  local py=$1 wheels=$2 site=$3 log=$4
  shift 4
  local skip=" $* " todo=() w dist mod
  for w in "$wheels"/*.whl; do
    [ -e "$w" ] || { echo "no wheels in $wheels (bash scripts/integration_wheels.sh)" >&2; return 2; }
    dist=$(basename "$w" | cut -d- -f1)
    [[ $skip == *" $dist "* ]] && continue
    mod=$(module_of "$dist")
    if "$py" -c "import $mod" 2>/dev/null; then
      echo "have $mod $("$py" -c "import $mod; print(getattr($mod, '__version__', '?'))" 2>/dev/null)" >>"$log"
    else
      todo+=("$w")
    fi
  done
  ((${#todo[@]})) || return 0
  echo "installing: ${todo[*]##*/}" >>"$log"
  "$py" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --target "$site" "${todo[@]}" \
    >>"$log" 2>&1 || { echo "install of the carried wheels failed" >&2; tail "$log"; return 1; }
}
