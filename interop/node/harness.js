#!/usr/bin/env node
'use strict'
// Drives a broker with KafkaJS so interop tests can compare what it sees with
// what it sent. Mirrors interop/java/ClientHarness.java: same commands, same
// JSON lines on stdout, exit 3 when fewer records than --count arrived.
//
// Records made by produce: key "k<i>", value "v<i>" (null for every
// --null-every'th), header h=<i>, i counting from --start (default 0); with
// --partitions N record i goes to partition i % N, with --timestamp-base B its
// create time is B + i.
//
// KafkaJS has no assign(): `consume` joins a throw-away group, seeks to the
// wanted offset and commits nothing. KafkaJS ships gzip only and takes other
// codecs as plug-ins: snappy is kafkajs-snappy; lz4 and zstd are small plug-ins
// below over pure-JS libraries (lz4js: LZ4 frames; zstd-codec: zstd compiled to
// JS), since the published plug-ins need native add-ons.

const { Kafka, logLevel, CompressionTypes, CompressionCodecs, ConfigResourceTypes } = require('kafkajs')
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
CompressionCodecs[CompressionTypes.LZ4] = () => {
  const lz4 = require('lz4js')
  const xxh32 = require('lz4js/xxh32.js')
  return {
    // Kafka reads only frames of independent blocks (FLG bit 5); lz4js leaves the bit clear
    // but writes 4 MB blocks, and a frame of one block is independent: mark it, fix the HC.
    async compress (encoder) {
      if (encoder.buffer.length > 4 << 20) throw new Error('lz4: batches over 4 MB would need linked blocks')
      const frame = Buffer.from(lz4.compress(encoder.buffer))
      frame[4] |= 0x20
      frame[6] = (xxh32.hash(0, frame, 4, 2) >> 8) & 0xff
      return frame
    },
    async decompress (buffer) { return Buffer.from(lz4.decompress(buffer)) }
  }
}
CompressionCodecs[CompressionTypes.ZSTD] = () => {
  // zstd-codec starts its module asynchronously, once
  const ready = new Promise(resolve => require('zstd-codec').ZstdCodec.run(resolve))
  return {
    // Streaming, not Simple: frames from other producers need not carry their content size
    async compress (encoder) { return Buffer.from(new (await ready).Streaming().compress(encoder.buffer, 3)) },
    async decompress (buffer) { return Buffer.from(new (await ready).Streaming().decompress(buffer)) }
  }
}

const USAGE = `usage: harness.js <command> --bootstrap HOST:PORT [options]
  produce --topic T [--partition P | --partitions N] --count N [--compression none|gzip|snappy|lz4|zstd]
          [--null-every K] [--start I] [--timestamp-base MS] [--idempotent] [--transactional-id ID] [--acks A]
  consume --topic T --partition P... [--offset earliest|latest|N] --count N [--timeout-ms MS] [--session-timeout-ms MS]
  group-consume --topic T --group G --count N [--timeout-ms MS] [--session-timeout-ms MS]
  list-offsets --topic T (--partition P --timestamp MS|earliest|latest)...
  admin create --topic T... [--partitions N] [--replication-factor R] [--config K=V]...
  admin describe --topic T
  admin alter-config --topic T --config K=V...
  admin delete --topic T...
  admin list-topics
  admin describe-group --group G [--topic T]...
every command: [--ssl-ca PEM-FILE [--ssl-cert PEM-FILE --ssl-key PEM-FILE]] [--sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 --sasl-username U --sasl-password P]
              [--sasl-mechanism OAUTHBEARER --sasl-oauth-token JWT]
              [--reauthentication-threshold-ms MS]`

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD
}

function parse (argv) {
  const opts = {}
  const positional = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a.startsWith('--')) {
      const flag = i + 1 >= argv.length || argv[i + 1].startsWith('--')
      ;(opts[a.slice(2)] = opts[a.slice(2)] || []).push(flag ? 'true' : argv[++i])
    } else {
      positional.push(a)
    }
  }
  const opt = (key, dflt) => {
    if (opts[key]) return opts[key][opts[key].length - 1]
    if (dflt === undefined) throw new Error(`missing --${key}\n${USAGE}`)
    return dflt
  }
  return { positional, opt, all: key => opts[key] || [], has: key => key in opts }
}

const out = obj => process.stdout.write(JSON.stringify(obj) + '\n')
const str = b => (b === null || b === undefined ? null : b.toString('utf8'))

function configs (args) {
  return args.all('config').map(kv => {
    const eq = kv.indexOf('=')
    return { name: kv.slice(0, eq), value: kv.slice(eq + 1) }
  })
}

async function produce (kafka, args) {
  const txId = args.opt('transactional-id', null)
  const producer = kafka.producer({
    idempotent: args.has('idempotent') || txId !== null,
    transactionalId: txId || undefined,
    maxInFlightRequests: txId || args.has('idempotent') ? 1 : undefined
  })
  await producer.connect()
  const count = Number(args.opt('count', '1'))
  const start = Number(args.opt('start', '0'))
  const nullEvery = Number(args.opt('null-every', '0'))
  const partition = args.has('partition') ? Number(args.opt('partition')) : undefined
  const partitions = Number(args.opt('partitions', '0'))
  const timestampBase = args.has('timestamp-base') ? Number(args.opt('timestamp-base')) : null
  const messages = []
  for (let i = start; i < start + count; i++) {
    const isNull = nullEvery > 0 && (i - start + 1) % nullEvery === 0
    const m = { key: `k${i}`, value: isNull ? null : `v${i}`, headers: { h: String(i) } }
    m.partition = partitions > 0 ? i % partitions : partition
    if (timestampBase !== null) m.timestamp = String(timestampBase + i)
    messages.push(m)
  }
  const codec = CODECS[args.opt('compression', 'none')]
  if (codec === undefined) throw new Error(`unsupported compression ${args.opt('compression')}`)
  const record = { topic: args.opt('topic'), compression: codec, messages }
  if (args.has('acks')) record.acks = Number(args.opt('acks'))
  let result
  if (txId) {
    const tx = await producer.transaction()
    result = await tx.send(record)
    await tx.commit()
  } else {
    result = await producer.send(record)
  }
  for (const r of result) out({ topic: r.topicName, partition: r.partition, baseOffset: Number(r.baseOffset), count })
  await producer.disconnect()
  return 0
}

// Consume until count records arrived or the timeout passed; returns the count.
async function drain (consumer, count, timeoutMs, onMessage) {
  let got = 0
  let done
  const finished = new Promise(resolve => { done = resolve })
  const timer = setTimeout(() => done(), timeoutMs)
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      if (got >= count || !onMessage(topic, partition, message)) return
      out({
        topic,
        partition,
        offset: Number(message.offset),
        timestamp: Number(message.timestamp),
        key: str(message.key),
        value: str(message.value),
        headers: Object.entries(message.headers || {}).map(([k, v]) => [k, str(v)])
      })
      if (++got >= count) done()
    }
  })
  return { finished, timer, got: () => got }
}

// Kafka's minimum session timeout, not KafkaJS's 30 s / 60 s: a broker may hold the first
// JoinGroup for a while waiting for other members, which slows every run.
function groupTimeouts (args) {
  const sessionTimeout = Number(args.opt('session-timeout-ms', '6000'))
  return { sessionTimeout, rebalanceTimeout: sessionTimeout, heartbeatInterval: Math.floor(sessionTimeout / 5) }
}

async function consume (kafka, args) {
  const topic = args.opt('topic')
  const partitions = (args.all('partition').length ? args.all('partition') : ['0']).map(Number)
  const count = Number(args.opt('count', '1'))
  const offset = args.opt('offset', 'earliest')
  const consumer = kafka.consumer({ groupId: `harness-assign-${process.pid}-${Date.now()}`, ...groupTimeouts(args) })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: offset !== 'latest' })
  const run = await drain(consumer, count, Number(args.opt('timeout-ms', '30000')), (t, p) => partitions.includes(p))
  if (offset !== 'earliest' && offset !== 'latest') for (const partition of partitions) consumer.seek({ topic, partition, offset })
  await run.finished
  clearTimeout(run.timer)
  await consumer.disconnect()
  return run.got() >= count ? 0 : 3
}

async function groupConsume (kafka, args) {
  const topic = args.opt('topic')
  const count = Number(args.opt('count', '1'))
  const consumer = kafka.consumer({ groupId: args.opt('group'), ...groupTimeouts(args) })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const next = {}
  const run = await drain(consumer, count, Number(args.opt('timeout-ms', '30000')), (t, p, m) => {
    next[p] = (BigInt(m.offset) + 1n).toString()
    return true
  })
  await run.finished
  clearTimeout(run.timer)
  const offsets = Object.entries(next).map(([p, offset]) => ({ topic, partition: Number(p), offset }))
  if (offsets.length) await consumer.commitOffsets(offsets)
  await consumer.disconnect()
  return run.got() >= count ? 0 : 3
}

// One answer per --partition; the i'th --timestamp goes with the i'th --partition (one applies to all).
async function listOffsets (kafka, args) {
  const topic = args.opt('topic')
  const partitions = (args.all('partition').length ? args.all('partition') : ['0']).map(Number)
  const stamps = args.all('timestamp').length ? args.all('timestamp') : ['latest']
  const admin = kafka.admin()
  await admin.connect()
  for (let i = 0; i < partitions.length; i++) {
    const partition = partitions[i]
    const ts = stamps[stamps.length === 1 ? 0 : i]
    let offset
    if (ts === 'earliest' || ts === 'latest') {
      const p = (await admin.fetchTopicOffsets(topic)).find(o => o.partition === partition)
      offset = ts === 'earliest' ? p.low : p.high
    } else {
      offset = (await admin.fetchTopicOffsetsByTimestamp(topic, Number(ts))).find(o => o.partition === partition).offset
    }
    out({ topic, partition, offset: Number(offset) })
  }
  await admin.disconnect()
  return 0
}

async function admin (kafka, args) {
  const sub = args.positional[1]
  const a = kafka.admin()
  await a.connect()
  try {
    switch (sub) {
      case 'create': {
        await a.createTopics({
          waitForLeaders: true,
          topics: args.all('topic').map(topic => ({
            topic,
            numPartitions: Number(args.opt('partitions', '1')),
            replicationFactor: Number(args.opt('replication-factor', '1')),
            configEntries: configs(args)
          }))
        })
        for (const topic of args.all('topic')) out({ created: topic })
        return 0
      }
      case 'describe': {
        const topic = args.opt('topic')
        const md = await a.fetchTopicMetadata({ topics: [topic] })
        const cfg = await a.describeConfigs({
          includeSynonyms: false,
          resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }]
        })
        const entries = {}
        for (const e of cfg.resources[0].configEntries) entries[e.configName] = e.configValue
        out({
          topic,
          partitions: md.topics[0].partitions.map(p => ({ partition: p.partitionId, leader: p.leader })),
          configs: entries
        })
        return 0
      }
      case 'alter-config': {
        const topic = args.opt('topic')
        await a.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: configs(args) }] })
        out({ altered: topic })
        return 0
      }
      case 'delete': {
        await a.deleteTopics({ topics: args.all('topic') })
        for (const topic of args.all('topic')) out({ deleted: topic })
        return 0
      }
      case 'list-topics':
        for (const topic of await a.listTopics()) out({ topic })
        return 0
      case 'describe-group': {
        const group = args.opt('group')
        const { groups } = await a.describeGroups([group])
        // naming the topics avoids an all-topics OffsetFetch (Topics=null)
        const topics = args.all('topic')
        const offsets = await a.fetchOffsets(topics.length ? { groupId: group, topics } : { groupId: group })
        out({
          group,
          state: groups[0].state,
          members: groups[0].members.length,
          offsets: offsets.flatMap(t => t.partitions.map(p => ({ topic: t.topic, partition: p.partition, offset: Number(p.offset) })))
        })
        return 0
      }
      default:
        process.stderr.write(USAGE + '\n')
        return 2
    }
  } finally {
    await a.disconnect()
  }
}

async function main () {
  const args = parse(process.argv.slice(2))
  const command = args.positional[0]
  const handlers = { produce, consume, 'group-consume': groupConsume, 'list-offsets': listOffsets, admin }
  if (!handlers[command]) {
    process.stderr.write(USAGE + '\n')
    return 2
  }
  const kafka = new Kafka({
    clientId: args.opt('client-id', 'kafka-compat-kafkajs-harness'),
    brokers: args.opt('bootstrap').split(','),      // HOST:PORT[,HOST:PORT...], as the other clients take it
    logLevel: logLevel.ERROR,
    retry: { retries: 3 },
    ssl: args.has('ssl-ca') ? tls(args) : undefined,
    // KIP-368: log in again this long before the broker's session would end (KafkaJS's default: 10 s)
    reauthenticationThreshold: Number(args.opt('reauthentication-threshold-ms', 10000)),
    sasl: args.has('sasl-mechanism') ? sasl(args) : undefined
  })
  return handlers[command](kafka, args)
}

// SASL options; OAUTHBEARER sends the token given (an unsecured JWT, for the broker's unsecured validator)
function sasl (args) {
  const mechanism = args.opt('sasl-mechanism').toLowerCase()
  if (mechanism === 'oauthbearer') {
    const value = args.opt('sasl-oauth-token')
    return { mechanism, oauthBearerProvider: async () => ({ value }) }
  }
  return { mechanism, username: args.opt('sasl-username'), password: args.opt('sasl-password') }
}

// TLS options: the CA to trust, and the client's own certificate when the broker asks for one
function tls (args) {
  const read = key => require('fs').readFileSync(args.opt(key))
  const out = { ca: [read('ssl-ca')] }
  if (args.has('ssl-cert')) Object.assign(out, { cert: read('ssl-cert'), key: read('ssl-key') })
  return out
}

// stdout to a pipe is written asynchronously: exit only once every line is out
main().then(
  rc => process.stdout.write('', () => process.exit(rc)),
  err => {
    process.stderr.write(`${err.stack || err}\n`)
    process.exit(1)
  }
)
