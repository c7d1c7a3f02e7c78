// Sends through @sendgrid/mail. Its base URL is a default request option of
// its client; setApiKey resets it, so it is set after.
import sgMail from '@sendgrid/mail';
import { send, attachmentBytes, content, report, fail } from './common.mjs';

function client(key) {
  sgMail.setApiKey(key);
  sgMail.client.setDefaultRequest('baseUrl', send.base_url);
}

const message = {
  from: { email: send.from, name: send.from_name },
  ...content,
  attachments: [{
    content: attachmentBytes.toString('base64'),
    filename: send.attachment.filename,
    type: send.attachment.content_type,
    disposition: 'attachment',
  }],
};

try {
  client(send.password);
  const [response] = await sgMail.send(message);
  const result = { status: response.statusCode, id: response.headers['x-message-id'] };

  // Legacy substitutions: SendGrid replaces the tags in what it sends.
  const [substituted] = await sgMail.send({
    from: message.from, to: send.to[0], subject: 'Code for -name-', text: 'Hi -name-, your code is -code-.',
    substitutions: { name: 'Alice', code: '834221' }, substitutionWrappers: ['-', '-'],
  });
  result.substituted_id = substituted.headers['x-message-id'];

  // Content types with parameters, as frameworks write them.
  const [typed] = await sgMail.send({
    from: message.from, to: send.to[0], subject: 'Typed content',
    content: [
      { type: 'text/plain; charset=utf-8', value: send.text },
      { type: 'text/html; charset=UTF-8', value: send.html },
      { type: 'text/calendar; method=REQUEST', value: 'BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nEND:VCALENDAR\r\n' },
    ],
  });
  result.typed_id = typed.headers['x-message-id'];

  // SendGrid's largest send, 1,000 personalizations: one X-Message-Id
  // answers it, which the SDK's HTTP client must be able to read.
  const many = Array.from({ length: 1000 }, (_, i) => ({ to: [{ email: `user${i}@example.com` }] }));
  const [thousand] = await sgMail.send({ from: message.from, personalizations: many, subject: 'Many', text: 'Hi' });
  result.many = { status: thousand.statusCode, id: thousand.headers['x-message-id'] };

  client('not-the-password');
  try {
    await sgMail.send(message);
    result.wrong_key = 'accepted';
  } catch (err) {
    result.wrong_key = { status: err.code, message: err.response.body.errors[0].message };
  }
  report(result);
} catch (err) {
  fail(err);
}
