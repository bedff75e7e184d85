// A user of offerlog with kafkajs and @kafkajs/confluent-schema-registry:
// it looks the ingest schema up in offerlog's schema registry API, produces
// a document framed as Confluent serializers frame it, reads its verdict back
// from documents.results, and reads a topic written with every compression
// codec. It prints one JSON object on stdout; the Go test checks it.
//
// Environment: BROKERS (host:port,...), SASL_USER and SASL_PASS
// (SCRAM-SHA-512), REGISTRY (http://host:port/schema-registry), TOKEN (an
// offerlog token, sent as the registry client sends credentials: HTTP basic
// auth), PK (the document's key), WRITER_SCHEMA (the writer's schema it
// registers and writes with), CODEC_TOPICS (topic,...) and EXPECT (the
// value every record of those holds).
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const { SchemaRegistry, SchemaType, COMPATIBILITY } = require('@kafkajs/confluent-schema-registry')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const fzstd = require('fzstd')

// kafkajs ships gzip; the others are plugins. LZ4 and zstd here are pure
// JavaScript (no native build): lz4js for Kafka's LZ4 frames, fzstd to read
// zstd (this check only reads with them).
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress (encoder) { return Buffer.from(lz4.compress(encoder.buffer)) },
  async decompress (buffer) { return Buffer.from(lz4.decompress(buffer)) }
})
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress () { throw new Error('zstd: this check only reads') },
  async decompress (buffer) { return Buffer.from(fzstd.decompress(buffer)) }
})

const env = (name) => {
  const v = process.env[name]
  if (v === undefined) throw new Error(`${name} is not set`)
  return v
}

async function main () {
  const kafka = new Kafka({
    clientId: 'kafkajs-check',
    brokers: env('BROKERS').split(','),
    sasl: { mechanism: 'scram-sha-512', username: env('SASL_USER'), password: env('SASL_PASS') },
    logLevel: logLevel.NOTHING
  })
  const registry = new SchemaRegistry({ host: env('REGISTRY'), auth: { username: 'offerlog', password: env('TOKEN') } })
  const out = { codecs: {} }

  out.schemaId = await registry.getLatestSchemaId('documents.ingest-value')
  // The writer's own schema (a field of its own), registered as most
  // serializers do before they write: the subject is FORWARD (the client
  // checks the subject's level is the one it expects), so offerlog, which
  // reads with its own schema, takes it.
  const { id } = await registry.register({ type: SchemaType.AVRO, schema: env('WRITER_SCHEMA') },
    { subject: 'documents.ingest-value', compatibility: COMPATIBILITY.FORWARD })
  out.registeredId = id
  const pk = env('PK')
  const value = await registry.encode(id, {
    pk,
    version: 1,
    epoch: 1,
    action: 'UPSERT',
    timestamp: Date.now(),
    ttl_seconds: 0,
    fields: [{ name: 'title', string: 'written by kafkajs' }],
    embeddings: [],
    producer_note: 'kafkajs'
  })
  const producer = kafka.producer()
  await producer.connect()
  // kafkajs's default partitioner is Java's murmur2, as offerlog expects.
  await producer.send({ topic: 'documents.ingest', messages: [{ key: 'shop/' + pk, value }] })
  await producer.disconnect()

  const codecTopics = env('CODEC_TOPICS').split(',')
  const expect = env('EXPECT')
  const consumer = kafka.consumer({ groupId: 'kafkajs-check-' + pk })
  await consumer.connect()
  await consumer.subscribe({ topics: ['documents.results', ...codecTopics], fromBeginning: true })
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out: ' + JSON.stringify(out))), 90000)
    const done = () => {
      if (out.verdict && codecTopics.every((t) => t in out.codecs)) {
        clearTimeout(timer)
        resolve()
      }
    }
    consumer.run({
      eachMessage: async ({ topic, message }) => {
        if (topic === 'documents.results') {
          const v = await registry.decode(message.value)
          if (v.pk === pk) out.verdict = v
        } else {
          out.codecs[topic] = message.value.toString() === expect
        }
        done()
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  process.stdout.write(JSON.stringify(out) + '\n')
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + '\n')
  process.exit(1)
})
