# example-needs: a ClickHouse cluster (ch1:9000)
LOOM_TEST_CLICKHOUSE_URL=clickhouse://loom:pw@ch1:9000/loom LOOM_CLICKHOUSE_CLUSTER=loom_cluster \
  ./loom test tests/deploy/test_clickhouse_cluster.py tests/core/test_store_contract.py
