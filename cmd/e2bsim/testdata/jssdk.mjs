// Runs E2B's official JS SDK against e2bsim: every control-plane call the
// gateway relies on, through the SDK's own code (routes, encodings, error
// classes). Prints "ok <step>" per step; any failed assertion exits non-zero.
// E2B_SDK is the SDK's ESM entry (dist/index.mjs of e2b@2.51.0); E2B_API_URL
// and E2B_API_KEY point it at the simulator.
import assert from 'node:assert/strict'
import { pathToFileURL } from 'node:url'

const sdk = await import(pathToFileURL(process.env.E2B_SDK).href)
const { Sandbox, Template, AuthenticationError, NotFoundError, SandboxNotFoundError, RateLimitError, TimeoutError } = sdk
const step = (name) => console.log('ok ' + name)

// Templates: aliases (the team's 200, E2B's public 403, unknown 404) and tags.
assert.equal(await Template.exists('base'), true)
assert.equal(await Template.exists('my-app'), true)
assert.equal(await Template.exists('no-such-template'), false)
step('Template.exists')
const assigned = await Template.assignTags('my-app', ['v1'])
assert.deepEqual(assigned.tags, ['v1'])
const tags = await Template.getTags('my-app')
assert.deepEqual(tags.map((t) => t.tag), ['default', 'v1'])
assert.ok(tags.every((t) => t.buildId === assigned.buildId))
await Template.removeTags('my-app', ['v1'])
assert.deepEqual((await Template.getTags('my-app')).map((t) => t.tag), ['default'])
step('Template tags')

// Create (POST /v2/sandboxes): always secured.
const meta = { user: 'a b', app: 'c++' }
const a = await Sandbox.create('base', { timeoutMs: 600_000, metadata: meta })
const b = await Sandbox.create('base', { timeoutMs: 600_000, metadata: meta })
const other = await Sandbox.create({ timeoutMs: 600_000, metadata: { user: 'other' } })
assert.match(a.sandboxId, /^i[a-z0-9]{20}$/)
step('Sandbox.create')

// List: the metadata filter as the SDK encodes it, paged one at a time.
const pager = Sandbox.list({ query: { metadata: meta, state: ['running'] }, limit: 1 })
const listed = []
while (pager.hasNext) listed.push(...(await pager.nextItems()))
assert.deepEqual(listed.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort())
assert.deepEqual(listed[0].metadata, meta)
step('Sandbox.list metadata and paging')

// Info, timeout (replaced, not only extended), metrics.
const info = await Sandbox.getInfo(a.sandboxId)
assert.equal(info.templateId.length > 0, true)
assert.equal(info.name, 'base')
assert.equal(info.state, 'running')
assert.deepEqual(info.metadata, meta)
step('Sandbox.getInfo')
await Sandbox.setTimeout(a.sandboxId, 120_000)
const end = (await Sandbox.getInfo(a.sandboxId)).endAt.getTime()
assert.ok(Math.abs(end - (Date.now() + 120_000)) < 10_000, `endAt ${new Date(end).toISOString()}`)
step('Sandbox.setTimeout')
const metrics = await Sandbox.getMetrics(a.sandboxId)
assert.ok(Array.isArray(metrics))
step('Sandbox.getMetrics')

// Pause (true, then false once paused), connect (POST /v2/sandboxes/{id}/connect)
// resumes it and extends a running one.
assert.equal(await Sandbox.pause(a.sandboxId), true)
assert.equal(await Sandbox.pause(a.sandboxId), false)
assert.equal((await Sandbox.getInfo(a.sandboxId)).state, 'paused')
step('Sandbox.pause')
const resumed = await Sandbox.connect(a.sandboxId, { timeoutMs: 60_000 })
assert.equal(resumed.sandboxId, a.sandboxId)
assert.equal((await Sandbox.getInfo(a.sandboxId)).state, 'running')
await Sandbox.connect(b.sandboxId)
step('Sandbox.connect')

// Snapshots.
const snap = await Sandbox.createSnapshot(b.sandboxId, { name: 'sdk-snap' })
assert.ok(snap.snapshotId.endsWith('/sdk-snap:default'), snap.snapshotId)
const snaps = await Sandbox.listSnapshots().nextItems()
assert.ok(snaps.some((s) => s.snapshotId === snap.snapshotId))
step('Sandbox snapshots')

// Kill: true, then false once gone; its info is then NotFound.
assert.equal(await Sandbox.kill(other.sandboxId), true)
assert.equal(await Sandbox.kill(other.sandboxId), false)
await assert.rejects(Sandbox.getInfo(other.sandboxId), NotFoundError)
step('Sandbox.kill')

// Error classes.
await assert.rejects(Sandbox.connect('nonexistent'), (e) => e instanceof NotFoundError || e instanceof SandboxNotFoundError)
await assert.rejects(Sandbox.getInfo('abc123'), NotFoundError)
await assert.rejects(Sandbox.list({ apiKey: 'e2b_ffff' }).nextItems(), AuthenticationError)
const made = []
await assert.rejects(async () => { for (;;) made.push(await Sandbox.create('base', { timeoutMs: 60_000 })) }, RateLimitError)
step('error classes')
void TimeoutError
