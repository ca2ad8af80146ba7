# Sourced by the scripts beside it, which run under set -Eeuo pipefail, so
# that none of them ends without saying why.
#
# fail prints one line on stderr, "NAME: WHAT", and ends the script with
# status 1. A command that fails with no check of its own, which errexit
# would end the script on in silence, goes through fail too, named with its
# line. NAME is the script's name without .sh; FAIL_STEP, when set, is put
# before WHAT ("step \"ping\" failed: ..."). A script may define
# fail_context, whose output comes before the line (demo.sh prints the
# daemon's last log lines there), and sets FAIL_QUIET while commands that
# may fail run unchecked (a cleanup).

fail() {
	if declare -F fail_context >/dev/null; then
		FAIL_QUIET=1 fail_context >&2 || true
	fi
	local name=${0##*/}
	echo "${name%.sh}: ${FAIL_STEP:+step \"$FAIL_STEP\" failed: }$*" >&2
	exit 1
}

# Only the top level speaks: a failure in a subshell is seen there too, as
# the command that ran it.
trap 'fail_rc=$?; ((BASH_SUBSHELL)) || [[ -n ${FAIL_QUIET:-} ]] || fail "\`$BASH_COMMAND\` exited $fail_rc ($0 line $LINENO)"' ERR
