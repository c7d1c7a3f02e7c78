package mailparse

import (
	"bytes"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Link kinds (SPEC §15): what following the link does.
const (
	KindVerify      = "verify"      // confirm or activate an address or account
	KindReset       = "reset"       // reset a password
	KindLogin       = "login"       // sign in by the link alone (a magic link)
	KindUnsubscribe = "unsubscribe" // unsubscribe, opt out, email preferences
	KindOther       = "other"
)

// linkCue is what a link says about itself besides its URL.
type linkCue struct {
	text  *string // anchor text
	label string  // title, aria-label or image alt text of an HTML anchor
	lead  string  // text just before the link in its paragraph or line
}

// Cue phrases, lowercase. A phrase matches at a word start; one ending in
// '*' is a stem and may run on ("verif*": verify, verification). Phrases
// in scripts written without spaces (Japanese, Chinese) match anywhere.
var (
	unsubscribePhrases = cuePhrases(
		"unsubscribe", "unsub*", "opt out", "opt-out", "optout", "stop receiving", "stop getting",
		"no longer wish to receive", "don't want to receive", "do not want to receive",
		"email preferences", "e-mail preferences", "mail preferences", "manage preferences",
		"update preferences", "update your preferences", "manage your preferences",
		"subscription preferences", "notification settings", "notification preferences",
		"email settings", "manage email", "manage notifications", "manage subscriptions",
		"preferences", "email-preferences", "email_preferences", "preferencias", "préférences",
		"präferenzen", "preferências", "preferenze",
		"darse de baja", "dar de baja", "date de baja", "cancelar suscripción", "cancelar la suscripción",
		"anular suscripción", "desuscribir*", "preferencias de correo",
		"se désabonner", "désabonner", "désinscri*", "se désinscrire", "désabonnement", "préférences e-mail",
		"préférences de communication", "abbestellen", "abmelden", "newsletter abmelden", "austragen",
		"e-mail-einstellungen", "benachrichtigungseinstellungen",
		"descadastr*", "cancelar inscrição", "cancelar a inscrição", "cancelar assinatura de e-mails",
		"disiscriviti", "annulla iscrizione", "cancella iscrizione", "uitschrijven", "afmelden",
		"配信停止", "配信解除", "購読解除", "購読を停止", "メール配信の停止", "配信設定",
		"退订", "取消订阅", "退訂", "取消訂閱", "구독 취소", "수신거부", "수신 거부", "отписаться",
	)
	resetPhrases = cuePhrases(
		"reset*", "forgot*", "password", "passwort", "kennwort", "passwd", "recover*",
		"contraseña", "contrasena", "restablecer", "mot de passe", "réinitialiser", "reinitialiser",
		"zurücksetzen", "redefinir", "senha", "reimposta", "wachtwoord",
		"パスワード", "再設定", "重置", "密码", "密碼", "비밀번호", "пароль",
	)
	verifyPhrases = cuePhrases(
		"verif*", "confirm*", "activat*", "validat*",
		"verificar", "confirmar", "activar", "ativar", "confirmer", "vérifier", "vérification",
		"activer", "valider", "bestätig*", "verifizier*", "aktivier*", "bevestig*", "conferma*",
		"verifica*", "attiva*", "本登録", "認証", "有効化", "メールアドレスの確認", "メールアドレスを確認",
		"アカウントを確認", "验证", "驗證", "确认", "確認電子郵件", "激活", "啟用", "인증", "이메일 확인",
		"подтвердить", "подтверждение",
	)
	loginPhrases = cuePhrases(
		"sign in", "sign-in", "signin", "sign me in", "log in", "log-in", "login", "log me in", "logon",
		"magic link", "magic*", "iniciar sesión", "inicia sesión", "iniciar sessão", "acceder", "entrar",
		"se connecter", "connexion", "anmelden", "einloggen", "accedi", "inloggen",
		"ログイン", "サインイン", "登录", "登入", "登錄", "로그인", "войти",
	)
	// A confirmation of an order or a booking is not an address to verify,
	// nor is a link to undo one, nor an offer to activate.
	notVerifyPhrases = cuePhrases(
		"cancel*", "remove", "not you", "not me", "wasn't you", "wasn't me", "report",
		"order*", "booking*", "reservation*", "invoice*", "receipt*", "payment*", "purchase*",
		"shipping", "shipment*", "delivery", "appointment*", "pedido*", "commande*", "bestellung*",
		"réservation*", "reserva*", "encomenda*", "注文", "订单", "訂單", "予約",
		"trial", "offer*", "discount*", "coupon*", "promo*", "deal", "deals",
	)
	// A sign-in link is a magic link only when it says so; "Log in" alone
	// leads to a login form.
	magicPhrases = cuePhrases(
		"magic*", "passwordless", "sign-in link", "sign in link", "signin link", "login link",
		"log in link", "log-in link", "sign-in-link", "signin-link", "login-link", "log-in-link",
		"enlace mágico", "link mágico", "link magico", "lien magique", "magischer link",
		"マジックリンク", "魔法链接",
	)
	// Anchor words of a page about an action rather than the action: "Learn
	// how to verify your account", "Forgot your password? Contact support".
	articlePhrases = cuePhrases(
		"learn*", "how to", "how do", "help", "support", "faq*", "read more", "read about",
		"more about", "find out", "contact", "guide*", "article*", "docs", "documentation",
		"tutorial*", "blog", "tips", "what is", "why",
		"ayuda", "más información", "aide", "en savoir plus", "hilfe", "mehr erfahren",
		"ajuda", "saiba mais", "aiuto", "scopri", "ヘルプ", "詳しく", "帮助", "幫助", "了解更多",
		"도움말", "помощь", "подробнее",
	)
	// Anchor words that say nothing of their own, so that the text before
	// the link speaks for it: "To reset your password, click here".
	genericAnchorWords = map[string]bool{
		"click": true, "here": true, "this": true, "link": true, "tap": true, "button": true,
		"continue": true, "go": true, "open": true, "please": true, "the": true, "below": true,
		"aquí": true, "aqui": true, "haz": true, "clic": true, "ici": true, "cliquez": true,
		"hier": true, "klicken": true, "sie": true, "clique": true, "qui": true, "clicca": true,
		"こちら": true, "ここ": true, "这里": true, "點擊這裡": true, "点击这里": true,
	}
)

// URL query parameters that never carry a credential: campaign tracking,
// language, where to go next.
var notTokenParams = map[string]bool{
	"ref": true, "source": true, "medium": true, "campaign": true, "lang": true, "locale": true,
	"hl": true, "next": true, "continue": true, "callback": true, "url": true, "return": true,
	"returnto": true, "return_to": true, "returnurl": true, "return_url": true, "redirect": true,
	"redirect_to": true, "redirect_uri": true, "redirect_url": true, "redirectto": true, "dest": true,
	"destination": true, "from": true, "via": true, "mc_cid": true, "mc_eid": true, "_hsenc": true,
	"_hsmi": true, "fbclid": true, "gclid": true, "email": true, "utm": true, "page": true,
	"tab": true, "view": true, "type": true, "format": true, "theme": true, "mode": true,
}

// cuePhrase is one phrase of a list.
type cuePhrase struct {
	b    []byte
	stem bool // may run on past the phrase
	// spaced is set for scripts that separate words with spaces, where a
	// phrase must start and (unless stem) end at a word boundary.
	spaced bool
}

func cuePhrases(list ...string) []cuePhrase {
	out := make([]cuePhrase, len(list))
	for i, s := range list {
		s, stem := strings.CutSuffix(s, "*")
		r, _ := utf8.DecodeRuneInString(s)
		out[i] = cuePhrase{b: []byte(s), stem: stem, spaced: !unspacedScript(r)}
	}
	return out
}

// unspacedScript reports the scripts that run words together.
func unspacedScript(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) || r == 'ー'
}

// phraseSet names the lists a text matched, a bit per list.
type phraseSet uint8

const (
	phrasesUnsubscribe phraseSet = 1 << iota
	phrasesReset
	phrasesVerify
	phrasesLogin
	phrasesNotVerify
	phrasesMagic
	phrasesArticle
)

// phraseIndex finds the phrases of every list in one pass over a text,
// trying at each byte only the phrases that start with it.
type phraseIndex [256][]indexedPhrase

type indexedPhrase struct {
	cuePhrase
	list phraseSet
}

var linkPhrases = func() *phraseIndex {
	x := new(phraseIndex)
	for list, phrases := range map[phraseSet][]cuePhrase{
		phrasesUnsubscribe: unsubscribePhrases, phrasesReset: resetPhrases, phrasesVerify: verifyPhrases,
		phrasesLogin: loginPhrases, phrasesNotVerify: notVerifyPhrases, phrasesMagic: magicPhrases,
		phrasesArticle: articlePhrases,
	} {
		for _, p := range phrases {
			x[p.b[0]] = append(x[p.b[0]], indexedPhrase{p, list})
		}
	}
	return x
}()

// match returns the lists with a phrase in lowercased text.
func (x *phraseIndex) match(text []byte) phraseSet {
	var found phraseSet
	inWord := false
	for i, c := range text {
		// A phrase of a spaced script starts a word: inside one, only the
		// bytes of other scripts are tried.
		wordByte := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if inWord && wordByte {
			continue
		}
		inWord = wordByte
		for _, p := range x[c] {
			if found&p.list == 0 && bytes.HasPrefix(text[i:], p.b) &&
				(!p.spaced || !wordBefore(text, i) && (p.stem || !wordAt(text, i+len(p.b)))) {
				found |= p.list
			}
		}
	}
	return found
}

// wordBefore and wordAt tell whether a word goes on across i; digits
// count, so that "unsubscribe" does not match inside "xunsubscribe2".
func wordBefore(s []byte, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRune(s[:i])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func wordAt(s []byte, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRune(s[i:])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// linkKinds classifies links, reusing its buffers from one link to the next.
type linkKinds struct {
	label, url, lead []byte
	buf              [3][256]byte
}

// kind judges a link from its words and its URL. Unsubscribing needs no
// more than the words. The other kinds act on an account, and a page
// about the action ("Reset your password" to a help article) is not the
// action, so:
//
//   - a link into help, docs, a blog or an article, or whose anchor offers
//     to explain ("Learn how to verify your account"), is other;
//   - a link that carries a credential (a random token, or a value under a
//     name such as token or code) does what its words say: the anchor's own
//     words first, then the URL's; for an anchor that says nothing ("click
//     here", the URL itself) the text before it, then the URL's;
//   - a link without one does what its anchor says only if its URL says
//     the same ("Reset your password" to /password-reset) and is not a
//     page's title or a help site's, and signs in only if it says it is a
//     magic link: /login under "Log in" is the login form.
func (k *linkKinds) kind(u *url.URL, cue linkCue) string {
	if k.label == nil {
		k.label, k.url, k.lead = k.buf[0][:0], k.buf[1][:0], k.buf[2][:0]
	}
	k.label = k.label[:0]
	if cue.text != nil {
		k.label = appendLower(k.label, *cue.text)
	}
	if cue.label != "" {
		k.label = appendLower(append(k.label, ' '), cue.label)
	}
	label := bytes.TrimSpace(k.label)
	urlWords := k.urlWords(u)
	generic := genericAnchor(label)
	var lead []byte
	if generic && cue.lead != "" {
		k.lead = appendLower(k.lead[:0], cue.lead)
		lead = k.lead
	}
	said := [3]phraseSet{linkPhrases.match(label), linkPhrases.match(urlWords), linkPhrases.match(lead)}
	if (said[0]|said[1]|said[2])&phrasesUnsubscribe != 0 {
		return KindUnsubscribe
	}
	if !generic && said[0]&phrasesArticle != 0 || articleSection(u.Path) {
		return KindOther
	}
	if hasCredential(u) {
		order := said
		if generic {
			// Under "click here", or a URL written out in plain text, the
			// sentence before it is what the reader goes by: "click the
			// link below to verify your email address" over the words of
			// a path such as Keycloak's /login-actions/action-token.
			order = [3]phraseSet{said[0], said[2], said[1]}
		}
		for _, s := range order {
			if kind := actionKind(s); kind != "" {
				return kind
			}
		}
		return KindOther
	}
	if generic || articleSite(u.Hostname()) || articleTitle(u.Path) {
		return KindOther
	}
	kind := actionKind(said[0])
	if kind == "" || !names(said[1], kind) || kind == KindLogin && (said[0]|said[1])&phrasesMagic == 0 {
		return KindOther
	}
	return kind
}

// names reports whether phrases s name the action of kind.
func names(s phraseSet, kind string) bool {
	switch kind {
	case KindReset:
		return s&phrasesReset != 0
	case KindVerify:
		return s&phrasesVerify != 0 && s&phrasesNotVerify == 0
	case KindLogin:
		return s&phrasesLogin != 0
	}
	return false
}

// actionKind is the account action a text names, if any: a reset before a
// verification ("confirm your new password" resets), a verification before
// a sign-in ("verify to sign in").
func actionKind(s phraseSet) string {
	switch {
	case s&phrasesReset != 0:
		return KindReset
	case s&phrasesMagic != 0:
		// A magic link verifies the address it was sent to by signing in
		// ("/auth/v1/verify?type=magiclink"): it is the sign-in.
		return KindLogin
	case s&phrasesVerify != 0:
		if s&phrasesNotVerify != 0 {
			return ""
		}
		return KindVerify
	case s&phrasesLogin != 0:
		return KindLogin
	}
	return ""
}

// genericAnchor reports an anchor whose words say nothing about the link:
// none, "click here", or the URL itself written out.
func genericAnchor(label []byte) bool {
	if bytes.Contains(label, []byte("://")) || bytes.HasPrefix(label, []byte("www.")) {
		return true
	}
	for len(label) > 0 {
		i := bytes.IndexFunc(label, isWordRune)
		if i < 0 {
			break
		}
		label = label[i:]
		j := bytes.IndexFunc(label, func(r rune) bool { return !isWordRune(r) })
		if j < 0 {
			j = len(label)
		}
		if !genericAnchorWords[string(label[:j])] {
			return false
		}
		label = label[j:]
	}
	return true
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// appendLower appends s lowercased.
func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
		i += size
	}
	return dst
}

// urlWords is the part of the URL that says what it is for, lowercased and
// unescaped: host, path, fragment and the query without the parameters
// that only track a campaign (utm_campaign=password_reset says nothing
// about a footer link).
func (k *linkKinds) urlWords(u *url.URL) []byte {
	b := appendLower(k.url[:0], u.Hostname())
	b = appendLower(append(b, ' '), u.Path)
	eachParam(u.RawQuery, func(name, value string) bool {
		if !notTokenParam(name) || actionParams[strings.ToLower(name)] {
			b = appendLower(append(appendLower(append(b, ' '), name), '='), value)
		}
		return true
	})
	if u.Fragment != "" {
		b = appendLower(append(b, ' '), u.Fragment)
	}
	k.url = b
	return b
}

// eachParam calls more with each name and unescaped value of a raw query
// until it returns false, and reports whether it did.
func eachParam(raw string, more func(name, value string) bool) (stopped bool) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		name, value, _ := strings.Cut(pair, "=")
		if v, err := url.QueryUnescape(value); err == nil {
			value = v
		}
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if name != "" && !more(name, value) {
			return true
		}
	}
	return false
}

// actionParams carry no credential, but their value may name the link's
// action: Firebase's mode=verifyEmail or resetPassword, Supabase's
// type=magiclink or recovery.
var actionParams = map[string]bool{"mode": true, "type": true}

func notTokenParam(name string) bool {
	var buf [32]byte
	if len(name) > len(buf) {
		return false
	}
	lower := appendLower(buf[:0], name)
	return notTokenParams[string(lower)] || bytes.HasPrefix(lower, []byte("utm_"))
}

// articleSections are the path segments, and the first labels of the
// hosts, under which a site keeps pages that explain rather than act.
// (Not community or forum: a forum's own accounts are activated there.)
var articleSections = map[string]bool{
	"help": true, "helpcenter": true, "help-center": true, "help_center": true, "support": true,
	"docs": true, "doc": true, "documentation": true, "blog": true, "blogs": true, "faq": true,
	"faqs": true, "kb": true, "knowledgebase": true, "knowledge-base": true, "knowledge": true,
	"hc": true, "articles": true, "article": true, "guide": true, "guides": true, "learn": true,
	"tutorial": true, "tutorials": true, "howto": true, "how-to": true, "posts": true, "post": true,
	"journal": true, "wiki": true, "ayuda": true, "aide": true, "hilfe": true, "ajuda": true, "aiuto": true,
}

// articleSection reports a path into help, docs, a blog or the like.
func articleSection(path string) bool {
	for seg := range strings.SplitSeq(path, "/") {
		if i := strings.LastIndexByte(seg, '.'); i > 0 {
			seg = seg[:i]
		}
		if articleSections[strings.ToLower(seg)] {
			return true
		}
	}
	return false
}

// articleSite reports a host that serves help, docs, a blog or the like
// (help.example.com). Only for a link without a credential: an account
// can be confirmed on support.example.com.
func articleSite(host string) bool {
	first, _, _ := strings.Cut(host, ".")
	return articleSections[strings.ToLower(first)]
}

// articleTitle reports a path whose segments read as a page's title
// ("how-to-reset-your-password") or name a document ("verify.html"); an
// action's path is short ("reset-password").
func articleTitle(path string) bool {
	for seg := range strings.SplitSeq(path, "/") {
		words := 1
		for i := 0; i < len(seg); i++ {
			if seg[i] == '-' || seg[i] == '_' {
				words++
			}
		}
		if words >= 4 || documentName(seg) {
			return true
		}
	}
	return false
}

// documentName reports a path segment naming a page or a file.
func documentName(seg string) bool {
	i := strings.LastIndexByte(seg, '.')
	if i <= 0 {
		return false
	}
	switch strings.ToLower(seg[i+1:]) {
	case "html", "htm", "php", "asp", "aspx", "jsp", "png", "jpg", "jpeg", "gif", "svg", "pdf", "css", "js", "md":
		return true
	}
	return false
}

// credentialParams name the query parameters that carry a credential,
// whatever their value looks like (?token=verifytoken).
var credentialParams = map[string]bool{
	"token": true, "tok": true, "t": true, "code": true, "key": true, "k": true, "otp": true,
	"hash": true, "sig": true, "signature": true, "secret": true, "nonce": true, "ticket": true,
	"jwt": true, "auth": true, "jeton": true, "oobcode": true, // Firebase's action links
}

// credentialSegments are path segments that a credential follows
// (/password/reset/key/1-abc/); not auth, a section of many sites.
var credentialSegments = map[string]bool{"key": true, "token": true, "code": true, "otp": true, "ticket": true, "jwt": true}

var credentialSuffixes = [][]byte{[]byte("token"), []byte("_code"), []byte("-code"), []byte("_key"), []byte("-key")}

// credentialParam reports a parameter name that says it carries a
// credential: one of credentialParams, or one that ends in token, _code or
// _key (confirmation_token, invite_code; not postcode).
func credentialParam(name string) bool {
	var buf [32]byte
	if len(name) > len(buf) {
		return false
	}
	lower := appendLower(buf[:0], name)
	if credentialParams[string(lower)] {
		return true
	}
	for _, suffix := range credentialSuffixes {
		if bytes.HasSuffix(lower, suffix) {
			return true
		}
	}
	return false
}

// hasCredential reports whether the URL carries something that identifies
// the user or the request: a value under a credential's name, or a token.
func hasCredential(u *url.URL) bool {
	named := func(name, value string) bool { return !credentialParam(name) || strings.TrimSpace(value) == "" }
	return eachParam(u.RawQuery, named) || hasToken(u)
}

// hasToken reports whether the URL carries something random enough to be
// a credential or a request id: a query value or path segment of letters
// and digits, a long opaque string, a UUID.
func hasToken(u *url.URL) bool {
	noCredential := func(name, value string) bool { return notTokenParam(name) || !tokenLike(value) }
	if eachParam(u.RawQuery, noCredential) {
		return true
	}
	afterName := false
	for seg := range strings.SplitSeq(u.Path, "/") {
		if tokenLike(seg) && !slug(seg) || afterName && seg != "" && !documentName(seg) {
			return true
		}
		// /password/reset/key/<key>/: a segment named as a credential is
		// followed by one.
		afterName = credentialSegments[strings.ToLower(seg)]
	}
	if f := u.Fragment; f != "" {
		if strings.Contains(f, "=") {
			return eachParam(f, noCredential)
		}
		return tokenLike(f)
	}
	return false
}

// tokenLike: six or more characters of a URL-safe alphabet with a digit
// in them, or twenty or more; not a URL, a path or an address.
func tokenLike(s string) bool {
	if len(s) < 6 {
		return false
	}
	digits := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			digits++
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '-', c == '_', c == '.', c == '~',
			c == '=', c == '+', c == ':', c == '/' && i > 0: // ':' joins Django's signed values
		default:
			return false
		}
	}
	if hasPrefixFold(s, "http") || strings.Count(s, "/") > 1 {
		return false
	}
	return digits > 0 || len(s) >= 20
}

// slug reports a path segment made of words ("verify-your-email-2024",
// "welcome.html"): an article, not a token. A UUID is not a slug.
func slug(seg string) bool {
	if documentName(seg) {
		return true
	}
	if strings.Count(seg, "-") < 2 {
		return false
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == '-') {
			return true
		}
	}
	return false
}
