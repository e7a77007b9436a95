# example-needs: a long random LOOM_JWT_SECRET of your own and /var/lib/loom
LOOM_DATA_DIR=/var/lib/loom LOOM_HTTP_PORT=8080 LOOM_JWT_SECRET=<a long random value> ./loom up
