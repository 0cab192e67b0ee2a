#!/bin/sh
# The container's entrypoint: `worker` (the default), `web`, `migrate`, or any
# other command, run as given.
#
# Each branch ends in `exec`: the shell is replaced by the process, which then is
# PID 1 itself. So `docker stop`'s TERM, the Kubernetes preStop hook's
# `kill -TSTP 1`, and `docker kill -s TSTP` reach the worker with nothing in
# between, and the container's exit status is the worker's own (0 after a drain,
# 75 when pushes were lost, 1 on a bad configuration). A shell left in front
# would have to trap and forward every signal the worker knows (TERM, INT, TSTP,
# TTIN, USR1, USR2) and wait again after each one; exec has nothing to get wrong.
# PID 1 gets no default signal actions from the kernel, but the worker installs a
# handler for each of those signals, and gunicorn for its own.
set -eu

command="${1:-worker}"
if [ "$#" -gt 0 ]; then shift; fi

case "$command" in
  worker)
    # The health port for the HEALTHCHECK and the kubelet; the settings choose
    # its address (WURK["HEALTH_BIND"], docs/deployment.md).
    exec python manage.py wurk --health-port "${WURK_HEALTH_PORT:-7433}" "$@"
    ;;
  web)
    # WURK["MODE"] = "embedded" in the web settings runs job threads inside
    # each gunicorn worker (docs/embedded.md); the config file holds the hooks.
    exec gunicorn --config "${GUNICORN_CONFIG:-gunicorn.conf.py}" "${WSGI_APP:-app.wsgi}" "$@"
    ;;
  migrate)
    exec python manage.py migrate --noinput "$@"
    ;;
  *)
    exec "$command" "$@"
    ;;
esac
