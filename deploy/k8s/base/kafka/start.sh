# Kafka's start for offerlog, shared by deploy/k8s (ConfigMap kafka) and
# deploy/compose.yaml: writes this broker's properties, formats its storage
# once with the SCRAM-SHA-512 user that offerlog deploy init made, starts.
# KAFKA_NODE_ID (default: the pod's ordinal), KAFKA_HOST (default:
# HOSTNAME.kafka), KAFKA_VOTERS, KAFKA_EXTERNAL (host:port of an extra
# SASL listener for clients outside), KAFKA_USER, and KAFKA_PASSWORD or
# KAFKA_PASSWORD_FILE.
set -eu
id=${KAFKA_NODE_ID:-${HOSTNAME##*-}}
host=${KAFKA_HOST:-${HOSTNAME}.kafka}
voters=${KAFKA_VOTERS:-0@kafka-0.kafka:9093,1@kafka-1.kafka:9093,2@kafka-2.kafka:9093}
user=${KAFKA_USER:-offerlog}
password=${KAFKA_PASSWORD:-$(cat "${KAFKA_PASSWORD_FILE:?KAFKA_PASSWORD or KAFKA_PASSWORD_FILE}")}
listeners=SASL_PLAINTEXT://:9092,CONTROLLER://:9093
advertised=SASL_PLAINTEXT://$host:9092
map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
jaas="org.apache.kafka.common.security.scram.ScramLoginModule required username=\"$user\" password=\"$password\";"
if [ -n "${KAFKA_EXTERNAL:-}" ]; then
  listeners=$listeners,EXTERNAL://:${KAFKA_EXTERNAL##*:}
  advertised=$advertised,EXTERNAL://$KAFKA_EXTERNAL
  map=$map,EXTERNAL:SASL_PLAINTEXT
fi
conf=/tmp/server.properties
cat > $conf <<PROPS
node.id=$id
process.roles=broker,controller
listeners=$listeners
advertised.listeners=$advertised
listener.security.protocol.map=$map
controller.listener.names=CONTROLLER
controller.quorum.voters=$voters
inter.broker.listener.name=SASL_PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=$jaas
listener.name.external.scram-sha-512.sasl.jaas.config=$jaas
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:$user;User:ANONYMOUS
allow.everyone.if.no.acl.found=false
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
log.dirs=/var/lib/kafka/data
PROPS
# the readiness check's client (ready.sh)
cat > /tmp/client.properties <<PROPS
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=$jaas
PROPS
/opt/kafka/bin/kafka-storage.sh format --ignore-formatted -t "$CLUSTER_ID" -c $conf \
  --add-scram "SCRAM-SHA-512=[name=$user,password=$password]"
exec /opt/kafka/bin/kafka-server-start.sh $conf
