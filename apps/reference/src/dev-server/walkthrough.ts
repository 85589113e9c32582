export interface WalkthroughOptions {
  /** The operator token, when `npm start` generated it (a token the user set is not shown). */
  generatedOperatorToken?: string;
}

/** The curl session `npm start` prints once the app listens. */
export function walkthrough(baseUrl: string, options: WalkthroughOptions = {}): string {
  const json = `-H 'content-type: application/json'`;
  const field = (name: string) => `node -pe 'JSON.parse(require("fs").readFileSync(0)).${name}'`;
  const token = options.generatedOperatorToken
    ? `The operator token was generated for this run (set OPERATOR_TOKEN to choose one):

  export OPERATOR_TOKEN=${options.generatedOperatorToken}`
    : `The operator token is the OPERATOR_TOKEN you set; export it in the shell you try this in.`;
  return `
Reference app listening on ${baseUrl}

${token}

Operator routes (/outbox/*, the dashboard, /metrics, POST /organizations) take it as a bearer
token; an organization's routes take that organization's API key. Webhooks may go to local
addresses in this run only (WEBHOOK_ALLOW_PRIVATE_ADDRESSES=1).

Try it (each action commits its change and its event together; handlers run right after):

  OP="Authorization: Bearer $OPERATOR_TOKEN"

  # an organization with its first admin; the answer holds its API key, shown only there
  NEW=$(curl -s -X POST ${baseUrl}/organizations -H "$OP" ${json} -d '{"name":"Acme","adminEmail":"ada@acme.test"}')
  ORG=$(echo "$NEW" | ${field('id')})
  KEY="Authorization: Bearer $(echo "$NEW" | ${field('apiKey')})"

  # a webhook endpoint for public events (the secret is shown once); to watch the signed POSTs
  # arrive, run a receiver in another terminal first:
  #   node -e "require('http').createServer((q,s)=>{let b='';q.on('data',c=>b+=c).on('end',()=>{console.log(q.headers['webhook-id'],b);s.end()})}).listen(9999)"
  curl -s -X POST ${baseUrl}/organizations/$ORG/webhooks -H "$KEY" ${json} -d '{"url":"http://127.0.0.1:9999/hooks","events":["member.invited","invoice.paid"]}'

  # invite a member, issue an invoice and pay it
  curl -s -X POST ${baseUrl}/organizations/$ORG/members -H "$KEY" ${json} -d '{"email":"bob@acme.test","role":"member"}'
  INV=$(curl -s -X POST ${baseUrl}/organizations/$ORG/invoices -H "$KEY" ${json} -d '{"number":"INV-1","amountCents":12500,"currency":"EUR"}' | ${field('id')})
  curl -s -X POST ${baseUrl}/organizations/$ORG/invoices/$INV/pay -H "$KEY"

  # a bad payload is refused with a 400 naming the field, and nothing is written
  curl -s -X POST ${baseUrl}/organizations/$ORG/invoices -H "$KEY" ${json} -d '{"number":"INV-2","amountCents":-5,"currency":"EUR"}'
  # without the organization's key nothing is read or written: a 401 (another organization's
  # resources are 404s to it)
  curl -s ${baseUrl}/audit

See the effects:

  curl -s ${baseUrl}/audit -H "$KEY"                # one hash-chained entry per event
  curl -s ${baseUrl}/audit/verify -H "$OP"          # recomputes the whole chain
  curl -s ${baseUrl}/webhooks/deliveries -H "$KEY"  # signed deliveries and their status
  # a dead delivery (the receiver was down through its schedule) is sent again with:
  #   curl -s -X POST ${baseUrl}/webhooks/deliveries/<id>/replay -H "$KEY"
  curl -s ${baseUrl}/notifications -H "$KEY"        # in-app notifications
  curl -s ${baseUrl}/mails -H "$KEY"                # mail sent (SMTP_URL) or recorded
  curl -s ${baseUrl}/outbox -H "$OP"                # pending, dead, lag
  curl -s ${baseUrl}/health                         # readiness: database and outbox
  curl -s ${baseUrl}/health/live                    # liveness: event loop and outbox engine
  # the dashboard: open ${baseUrl}/outbox/ui/login and paste the operator token

Stop with Ctrl-C: the outbox finishes its in-flight work within the shutdown grace.
`;
}
