// Sends through postmark's ServerClient, pointed at capture by its
// requestHost and useHttps options.
import postmark from 'postmark';
import { send, attachmentBytes, fromHeader, report, fail } from './common.mjs';

const options = { requestHost: send.host, useHttps: false };
const message = {
  From: fromHeader,
  To: send.to.join(', '),
  Cc: send.cc.join(', '),
  Bcc: send.bcc.join(', '),
  Subject: send.subject,
  TextBody: send.text,
  HtmlBody: send.html,
  MessageStream: 'outbound',
  Attachments: [{
    Name: send.attachment.filename,
    Content: attachmentBytes.toString('base64'),
    ContentType: send.attachment.content_type,
    ContentID: null,
  }],
};

try {
  const sent = await new postmark.ServerClient(send.password, options).sendEmail(message);
  const result = { error_code: sent.ErrorCode, message: sent.Message, to: sent.To, id: sent.MessageID };

  try {
    await new postmark.ServerClient('not-the-password', options).sendEmail(message);
    result.wrong_key = 'accepted';
  } catch (err) {
    result.wrong_key = { class: err.name, status: err.statusCode, code: err.code };
  }
  report(result);
} catch (err) {
  fail(err);
}
