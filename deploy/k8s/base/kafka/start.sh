# Kafka's start for offerlog, shared by deploy/k8s (ConfigMap kafka) and
# deploy/compose.yaml: writes this broker's properties, formats its storage
# once with the SCRAM-SHA-512 super user that offerlog deploy init made,
# starts. KAFKA_NODE_ID (default: the pod's ordinal), KAFKA_HOST (default:
# HOSTNAME.kafka), KAFKA_VOTERS, KAFKA_EXTERNAL (host:port of an extra
# listener for clients outside), KAFKA_USER, KAFKA_PASSWORD or
# KAFKA_PASSWORD_FILE, and KAFKA_TLS_DIR (default /etc/kafka-tls: deploy
# init's Secret offerlog-kafka-tls, ca.crt, tls.crt and tls.key).
#
# With the certificate (the default): every listener speaks TLS. Clients
# and brokers authenticate with SCRAM-SHA-512 over TLS (SASL_SSL) and may
# do what their ACLs allow (StandardAuthorizer, nothing without an ACL);
# the controller listener takes only a client with a certificate of the
# cluster's CA (mutual TLS, as Strimzi's): its principal User:CN=kafka is,
# with the SCRAM super user, the only super user. Without one (deploy init
# --kafka-tls=false): SASL_PLAINTEXT, and the controllers authenticate with
# PLAIN as the super user. No listener takes an anonymous client.
set -eu
id=${KAFKA_NODE_ID:-${HOSTNAME##*-}}
host=${KAFKA_HOST:-${HOSTNAME}.kafka}
voters=${KAFKA_VOTERS:-0@kafka-0.kafka:9093,1@kafka-1.kafka:9093,2@kafka-2.kafka:9093}
user=${KAFKA_USER:-offerlog}
password=${KAFKA_PASSWORD:-$(cat "${KAFKA_PASSWORD_FILE:?KAFKA_PASSWORD or KAFKA_PASSWORD_FILE}")}
tls=${KAFKA_TLS_DIR:-/etc/kafka-tls}
conf=/tmp/server.properties
scram="org.apache.kafka.common.security.scram.ScramLoginModule required username=\"$user\" password=\"$password\";"
if [ -f "$tls/tls.crt" ]; then
  proto=SASL_SSL
  # Kafka's PEM key store: the key (PKCS #8) and its chain in one file.
  cat "$tls/tls.key" "$tls/tls.crt" > /tmp/keystore.pem
  chmod 600 /tmp/keystore.pem
  ssl="ssl.keystore.type=PEM
ssl.keystore.location=/tmp/keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.crt
ssl.endpoint.identification.algorithm=https"
  cmap=CONTROLLER:SSL
  cprops="listener.name.controller.ssl.client.auth=required"
  supers="User:$user;User:CN=kafka"
else
  proto=SASL_PLAINTEXT
  ssl=""
  plain="org.apache.kafka.common.security.plain.PlainLoginModule required username=\"$user\" password=\"$password\" user_$user=\"$password\";"
  cmap=CONTROLLER:SASL_PLAINTEXT
  cprops="sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=$plain"
  supers="User:$user"
fi
listeners=$proto://:9092,CONTROLLER://:9093
advertised=$proto://$host:9092
map="$proto:$proto,$cmap"
if [ -n "${KAFKA_EXTERNAL:-}" ]; then
  listeners=$listeners,EXTERNAL://:${KAFKA_EXTERNAL##*:}
  advertised=$advertised,EXTERNAL://$KAFKA_EXTERNAL
  map=$map,EXTERNAL:$proto
fi
lower=$(echo "$proto" | tr 'A-Z' 'a-z')
cat > $conf <<PROPS
node.id=$id
process.roles=broker,controller
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
controller.quorum.voters=$voters
inter.broker.listener.name=$proto
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.$lower.scram-sha-512.sasl.jaas.config=$scram
listener.name.external.scram-sha-512.sasl.jaas.config=$scram
listener.security.protocol.map=$map
$cprops
$ssl
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=$supers
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
security.protocol=$proto
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=$scram
$ssl
PROPS
/opt/kafka/bin/kafka-storage.sh format --ignore-formatted -t "$CLUSTER_ID" -c $conf \
  --add-scram "SCRAM-SHA-512=[name=$user,password=$password]"
exec /opt/kafka/bin/kafka-server-start.sh $conf
