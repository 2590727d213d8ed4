#!/usr/bin/env bash
# git in a throwaway repository for lint-changed.test: a fixed identity and
# no user or system configuration, so the test runs the same everywhere.
#   git.sh <repo dir> <git arguments>...
set -euo pipefail
dir=$1
shift
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=lint GIT_AUTHOR_EMAIL=lint@example.com
export GIT_COMMITTER_NAME=lint GIT_COMMITTER_EMAIL=lint@example.com
exec git -C "$dir" "$@"
