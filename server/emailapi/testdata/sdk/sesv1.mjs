// Sends through @aws-sdk/client-ses (Amazon SES v1, the Query API),
// pointed at capture by the client's endpoint option: SendEmail,
// SendRawEmail, a wrong key, and an action capture does not serve.
import { SESClient, SendEmailCommand, SendRawEmailCommand, ListIdentitiesCommand } from '@aws-sdk/client-ses';
import { send, fromHeader, report, fail } from './common.mjs';

function client(secret) {
  return new SESClient({
    region: 'eu-west-1',
    endpoint: send.base_url,
    credentials: { accessKeyId: send.inbox, secretAccessKey: secret },
    maxAttempts: 1,
  });
}

const simple = new SendEmailCommand({
  Source: fromHeader,
  Destination: { ToAddresses: send.to, CcAddresses: send.cc, BccAddresses: send.bcc },
  Message: {
    Subject: { Data: send.subject, Charset: 'UTF-8' },
    Body: { Text: { Data: send.text }, Html: { Data: send.html } },
  },
  Tags: [{ Name: 'flow', Value: 'signup' }],
});

const raw = [
  `From: ${fromHeader}`,
  `To: ${send.to.join(', ')}`,
  `Subject: ${send.subject} (raw)`,
  'MIME-Version: 1.0',
  'Content-Type: text/plain; charset=utf-8',
  'Content-Transfer-Encoding: 8bit',
].join('\r\n') + '\r\n\r\n' + send.text.replace(/\n/g, '\r\n');

function refusal(err) {
  return { name: err.name, status: err.$metadata && err.$metadata.httpStatusCode, message: err.message };
}

try {
  const sent = await client(send.password).send(simple);
  const rawSent = await client(send.password).send(new SendRawEmailCommand({
    Destinations: [...send.to, ...send.bcc],
    RawMessage: { Data: Buffer.from(raw) },
  }));
  const result = { status: sent.$metadata.httpStatusCode, id: sent.MessageId, raw_id: rawSent.MessageId };
  try {
    await client('not-the-password').send(simple);
    result.wrong_key = 'accepted';
  } catch (err) {
    result.wrong_key = refusal(err);
  }
  try {
    await client(send.password).send(new ListIdentitiesCommand({}));
    result.other_action = 'accepted';
  } catch (err) {
    result.other_action = refusal(err);
  }
  report(result);
} catch (err) {
  fail(err);
}
