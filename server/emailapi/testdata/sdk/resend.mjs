// Sends through resend, pointed at capture by the client's baseUrl option
// (the RESEND_BASE_URL environment variable works too).
import { Resend } from 'resend';
import { send, attachmentBytes, content, fromHeader, report, fail } from './common.mjs';

const message = {
  from: fromHeader,
  ...content,
  attachments: [{
    filename: send.attachment.filename,
    content: attachmentBytes,
    contentType: send.attachment.content_type,
  }],
};

try {
  const { data, error } = await new Resend(send.password, { baseUrl: send.base_url }).emails.send(message);
  if (error) throw new Error(JSON.stringify(error));
  const result = { id: data.id };

  // A batch: two emails, each its own message; batches take no attachments.
  const batch = await new Resend(send.password, { baseUrl: send.base_url }).batch.send(
    send.to.map((to, i) => ({ from: fromHeader, to, subject: `${send.subject} (batch ${i})`, text: send.text, tags: [{ name: 'flow', value: 'batch' }] })));
  if (batch.error) throw new Error(JSON.stringify(batch.error));
  result.batch_ids = batch.data.data.map((d) => d.id);

  const wrong = await new Resend('not-the-password', { baseUrl: send.base_url }).emails.send(message);
  result.wrong_key = wrong.error ? { name: wrong.error.name, status: wrong.error.statusCode } : 'accepted';
  report(result);
} catch (err) {
  fail(err);
}
