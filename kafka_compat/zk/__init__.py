"""ZooKeeper mode: Kafka's znode layout and JSON (zk_data, pure) and the client that reads and writes it
(kafka_zk_client, over kazoo)."""
