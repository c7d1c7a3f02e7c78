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

  // Templates: capture has none to render, so it keeps which and the model.
  const client = new postmark.ServerClient(send.password, options);
  const templated = await client.sendEmailWithTemplate({
    From: fromHeader, To: send.to[0], TemplateAlias: 'welcome', TemplateModel: { name: 'Alice', code: 834221 },
  });
  result.template_id = templated.MessageID;
  const batch = await client.sendEmailBatchWithTemplates(send.to.map((to, i) => ({
    From: fromHeader, To: to, TemplateId: 1000 + i, TemplateModel: { n: i },
  })));
  result.batch_template = batch.map((r) => ({ code: r.ErrorCode, id: r.MessageID }));

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
