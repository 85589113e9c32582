// The library's layout, checked by `npm run lint` (dependency-cruiser): no import cycle, type-only
// imports included, and imports that run one way between the folders of libs/outbox/src, from
// the Nest face at the top down to the store. Each role reaches the table through its own store.
const SRC = '^libs/outbox/src/';

/** `from` may not import `to`: one rule per pair of roles that must stay apart. */
const apart = (name, from, to, comment) => ({
  name,
  comment,
  severity: 'error',
  from: { path: `${SRC}${from}`, pathNot: '\\.spec\\.ts$' },
  to: { path: `${SRC}${to}` },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle, type-only imports included: the layers no longer read one way.',
      severity: 'error',
      from: { path: SRC },
      to: { circular: true },
    },
    apart(
      'store-is-the-floor',
      'store/',
      '(engine|handlers|emit|admin|testing|telemetry)/|outbox\\.(module|health|liveness|options)\\.ts|index\\.ts',
      'The store is spoken to; it speaks to nothing above it.',
    ),
    apart(
      'common-stands-alone',
      'common/',
      '(store|engine|handlers|emit|admin|testing|telemetry)/|outbox\\.(module|health|liveness|options|errors|messages)\\.ts',
      'Small utilities every layer may use; they use none of the layers.',
    ),
    apart(
      'telemetry-observes-from-below',
      'telemetry/',
      '(engine|handlers|emit|admin|testing)/',
      'Every layer reports to telemetry, so it cannot depend on them.',
    ),
    apart(
      'emit-knows-no-engine',
      'emit/',
      '(engine|handlers|admin|testing)/',
      'Emitting writes a row; it does not know who delivers it.',
    ),
    apart(
      'handlers-know-no-engine',
      'handlers/',
      '(engine|admin|testing)/',
      'Handlers are run by the engine, never the other way.',
    ),
    apart(
      'engine-knows-no-operator',
      'engine/',
      '(admin|testing)/',
      'Operators and tests drive the engine.',
    ),
    apart(
      'engine-own-store',
      'engine/',
      'store/(admin|emit|testing\\.store|handler-transaction\\.store)',
      'The engine reaches the table through the lease repository, its reports and its sweep.',
    ),
    apart(
      'admin-own-store',
      'admin/',
      'store/(lease|emit|testing\\.store|handler-transaction\\.store|retention\\.store)',
      'OutboxAdmin, its command and dashboard read and change the table through the admin store.',
    ),
    apart(
      'testing-own-store',
      'testing/',
      'store/(lease|emit|admin|handler-transaction\\.store|retention\\.store|instance-report\\.store)',
      'The testing kit uses its own store (and the engine, as an app does).',
    ),
    apart(
      'handlers-own-store',
      'handlers/',
      'store/(lease|admin|testing\\.store|retention\\.store|instance-report\\.store)',
      'Transactional handlers record deliveries through their own store.',
    ),
    apart(
      'bridge-uses-the-outbox-as-an-app-does',
      'bridge/',
      '(engine|store|admin|testing)/',
      'A relay is a named handler and an inbox an emitter: neither reaches below the public parts.',
    ),
    apart(
      'ordering-is-a-seam',
      'ordering/',
      '(engine|handlers|emit|admin|testing|telemetry|bridge)/|outbox\\.(module|health|liveness)\\.ts',
      "Per-key ordering: the chains the executor asks of it, over the store's types; its " +
        'statements live in store/ordering/ with every other statement.',
    ),
    apart(
      'nothing-needs-the-bridge',
      '(engine|handlers|emit|store|admin|testing|telemetry|common|ordering)/',
      'bridge/',
      'Brokers are an add-on: the outbox works the same without them.',
    ),
    {
      name: 'the-outbox-needs-no-add-on',
      comment:
        'The root entry is the outbox itself: the bridges, the dashboard and the command are ' +
        'add-ons on entries of their own (/bridge, /admin, the bin), loaded only by who asks.',
      severity: 'error',
      from: {
        path: SRC,
        pathNot: `${SRC}(bridge/|admin/(dashboard/|cli/|index\\.ts$))|\\.spec\\.ts$`,
      },
      to: { path: `${SRC}(bridge/|admin/(dashboard|cli|index\\.ts))` },
    },
    apart(
      'no-entry-inside',
      '(?!(index|admin/index|bridge/index|testing/index)\\.ts$)',
      'index\\.ts$',
      'The package entry is for users; inside, import the file that defines the name.',
    ),
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
  },
};
