# example-needs: a Loom whose data dir is /var/lib/loom, stopped for the copy
kill -INT <pid of loom up>        # or Ctrl-C: it stops cleanly
tar -C /var/lib -czf loom-$(date +%F).tar.gz loom
./loom up
