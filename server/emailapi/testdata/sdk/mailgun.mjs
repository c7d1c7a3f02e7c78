// Sends through mailgun.js (with form-data), pointed at capture by the
// client's url option; the key goes in as the password of user "api".
import FormData from 'form-data';
import Mailgun from 'mailgun.js';
import { send, attachmentBytes, content, fromHeader, report, fail } from './common.mjs';

const mailgun = new Mailgun(FormData);
const domain = 'mg.example.com';
const message = {
  from: fromHeader,
  ...content,
  attachment: [{
    filename: send.attachment.filename,
    data: attachmentBytes,
    contentType: send.attachment.content_type,
  }],
};

try {
  const mg = mailgun.client({ username: 'api', key: send.password, url: send.base_url });
  const sent = await mg.messages.create(domain, message);
  const result = { status: sent.status, message: sent.message, id: sent.id };

  // A whole MIME message, sent as it is to the recipients in to.
  const mime = [
    `From: ${send.from}`,
    `To: ${send.to.join(', ')}`,
    `Subject: ${send.subject} (mime)`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    send.text.replace(/\n/g, '\r\n'),
  ].join('\r\n');
  const mimeSent = await mg.messages.create(domain, { to: [...send.to, ...send.bcc], message: Buffer.from(mime), 'o:tag': 'mime' });
  result.mime_id = mimeSent.id;

  try {
    const wrong = mailgun.client({ username: 'api', key: 'not-the-password', url: send.base_url });
    await wrong.messages.create(domain, message);
    result.wrong_key = 'accepted';
  } catch (err) {
    result.wrong_key = { status: err.status, details: err.details };
  }
  report(result);
} catch (err) {
  fail(err);
}
