# Kafka's readiness: the broker answers a client that authenticates.
exec /opt/kafka/bin/kafka-broker-api-versions.sh --bootstrap-server "${KAFKA_HOST:-${HOSTNAME}.kafka}:9092" --command-config /tmp/client.properties >/dev/null
