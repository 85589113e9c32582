/** The curl session `npm start` prints once the app listens. */
export function walkthrough(baseUrl: string): string {
  const json = `-H 'content-type: application/json'`;
  const id = `node -pe 'JSON.parse(require("fs").readFileSync(0)).id'`;
  return `
Reference app listening on ${baseUrl}

Try it (each action commits its change and its event together; handlers run right after):

  # an organization with its first admin
  ORG=$(curl -s -X POST ${baseUrl}/organizations ${json} -d '{"name":"Acme","adminEmail":"ada@acme.test"}' | ${id})

  # a webhook endpoint for public events (the secret is shown once); to watch the signed POSTs
  # arrive, run a receiver in another terminal first:
  #   node -e "require('http').createServer((q,s)=>{let b='';q.on('data',c=>b+=c).on('end',()=>{console.log(q.headers['webhook-id'],b);s.end()})}).listen(9999)"
  curl -s -X POST ${baseUrl}/organizations/$ORG/webhooks ${json} -d '{"url":"http://127.0.0.1:9999/hooks","events":["member.invited","invoice.paid"]}'

  # invite a member, issue an invoice and pay it
  curl -s -X POST ${baseUrl}/organizations/$ORG/members ${json} -d '{"email":"bob@acme.test","role":"member"}'
  INV=$(curl -s -X POST ${baseUrl}/organizations/$ORG/invoices ${json} -d '{"number":"INV-1","amountCents":12500,"currency":"EUR"}' | ${id})
  curl -s -X POST ${baseUrl}/organizations/$ORG/invoices/$INV/pay

  # a bad payload is refused with a 400 naming the field, and nothing is written
  curl -s -X POST ${baseUrl}/organizations/$ORG/invoices ${json} -d '{"number":"INV-2","amountCents":-5,"currency":"EUR"}'

See the effects:

  curl -s ${baseUrl}/audit                                  # one hash-chained entry per event
  curl -s ${baseUrl}/audit/verify                           # recomputes the chain
  curl -s "${baseUrl}/webhooks/deliveries?organizationId=$ORG"  # signed deliveries and their status
  # a dead delivery (the receiver was down through its schedule) is sent again with:
  #   curl -s -X POST "${baseUrl}/webhooks/deliveries/<id>/replay?organizationId=$ORG"
  curl -s "${baseUrl}/notifications?organizationId=$ORG"     # in-app notifications
  curl -s ${baseUrl}/mails                                  # mail sent (SMTP_URL) or recorded
  curl -s ${baseUrl}/outbox                                 # pending, dead, lag
  curl -s ${baseUrl}/health                                 # readiness: database and outbox

Stop with Ctrl-C: the outbox finishes its in-flight work within the shutdown grace.
`;
}
