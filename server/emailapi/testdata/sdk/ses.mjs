// Sends through @aws-sdk/client-sesv2, pointed at capture by the client's
// endpoint option. The access key id is the inbox id and the secret access
// key its SMTP password; the request is signed with Signature V4 as always.
import { SESv2Client, SendEmailCommand, SendBulkEmailCommand } from '@aws-sdk/client-sesv2';
import { send, attachmentBytes, fromHeader, report, fail } from './common.mjs';

function client(secret) {
  return new SESv2Client({
    region: 'eu-west-1',
    endpoint: send.base_url,
    credentials: { accessKeyId: send.inbox, secretAccessKey: secret },
    maxAttempts: 1,
  });
}

const simple = new SendEmailCommand({
  FromEmailAddress: fromHeader,
  Destination: { ToAddresses: send.to, CcAddresses: send.cc, BccAddresses: send.bcc },
  Content: {
    Simple: {
      Subject: { Data: send.subject, Charset: 'UTF-8' },
      Body: { Text: { Data: send.text }, Html: { Data: send.html } },
      Attachments: [{
        FileName: send.attachment.filename,
        ContentType: send.attachment.content_type,
        ContentDisposition: 'ATTACHMENT',
        RawContent: attachmentBytes,
      }],
    },
  },
  EmailTags: [{ Name: 'flow', Value: 'signup' }],
});

// A Raw message: the recipients in Destination, Bcc included, are the
// envelope; the headers name To and Cc only.
const raw = [
  `From: ${fromHeader}`,
  `To: ${send.to.join(', ')}`,
  `Cc: ${send.cc.join(', ')}`,
  `Subject: ${send.subject} (raw)`,
  'MIME-Version: 1.0',
  'Content-Type: text/plain; charset=utf-8',
  'Content-Transfer-Encoding: 8bit',
].join('\r\n') + '\r\n\r\n' + send.text.replace(/\n/g, '\r\n');
const rawCommand = new SendEmailCommand({
  Destination: { ToAddresses: send.to, CcAddresses: send.cc, BccAddresses: send.bcc },
  Content: { Raw: { Data: Buffer.from(raw) } },
});

try {
  const sent = await client(send.password).send(simple);
  const rawSent = await client(send.password).send(rawCommand);
  const result = { status: sent.$metadata.httpStatusCode, id: sent.MessageId, raw_id: rawSent.MessageId };

  // Bulk: one templated message per entry, the template kept, not rendered.
  const bulk = await client(send.password).send(new SendBulkEmailCommand({
    FromEmailAddress: fromHeader,
    DefaultContent: { Template: { TemplateName: 'welcome', TemplateData: JSON.stringify({ name: 'friend' }) } },
    BulkEmailEntries: send.to.map((to, i) => ({
      Destination: { ToAddresses: [to] },
      ReplacementEmailContent: i === 0 ? { ReplacementTemplate: { ReplacementTemplateData: JSON.stringify({ name: 'Alice' }) } } : undefined,
    })),
  }));
  result.bulk = bulk.BulkEmailEntryResults.map((r) => ({ status: r.Status, id: r.MessageId }));

  try {
    await client('not-the-password').send(simple);
    result.wrong_key = 'accepted';
  } catch (err) {
    result.wrong_key = { name: err.name, status: err.$metadata && err.$metadata.httpStatusCode, message: err.message };
  }
  report(result);
} catch (err) {
  fail(err);
}
