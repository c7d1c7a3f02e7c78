package mailparse

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Code is a one-time password or verification code that a message
// presents as one (SPEC §15).
type Code struct {
	Value   string // as written, without group separators
	Context string // up to 80 characters of the text around it
}

const (
	maxCodes = 10
	// maxCodeText is how much of each text is read for codes: they sit
	// near the top of short messages, and the cost stays bounded.
	maxCodeText  = 64 << 10
	contextRunes = 80
	// minCodeScore is the score a candidate needs (see score).
	minCodeScore = 3
	// maxCodeCandidates bounds the numbers weighed in one text.
	maxCodeCandidates = 256
	// nearCues is how many cues on each side of a candidate are weighed,
	// and maxCues how many one text may hold.
	nearCues = 8
	maxCues  = 2048
	// maxGapRunes is the widest gap between a cue and a candidate that
	// can tie them (see proximity); past it, the gap is not read further.
	maxGapRunes = 200
	// farBytes is how far apart (in bytes of text) a cue and a candidate
	// can be and still be weighed together.
	farBytes = 600
)

// findCodes finds the codes of a message in its subject, its text body and
// the lines of its HTML body, most likely first.
//
// A code is a run of 4 to 10 digits, or of capital letters and digits
// (possibly grouped: 123 456, 123-456, XK7-P2Q), that the text ties to a
// word such as "code", "PIN" or 验证码: close to it in the same sentence,
// or alone on its line below or above it. Numbers that read as something
// else (a price, a time, a date, an order, a phone number, a promotion)
// are left out. Being conservative is the point: a test that asks for
// "the code" must not get an order number.
func findCodes(subject string, text *string, lines string) []Code {
	f := codeFinders.Get().(*codeFinder)
	defer func() {
		// Drop what refers to the message before the finder waits for
		// the next one.
		clear(f.found)
		f.found, f.src = f.found[:0], ""
		codeFinders.Put(f)
	}()
	f.order = 0
	f.source(subject)
	if text != nil {
		f.source(truncateRunes(*text, maxCodeText))
	}
	f.source(lines)
	return f.result()
}

// codeFinders keeps finders and their buffers from one message to the next.
var codeFinders = sync.Pool{New: func() any {
	f := &codeFinder{}
	f.cues, f.cands = f.cueBuf[:0], f.candBuf[:0]
	return f
}}

// cueClass is what a word says about a number near it.
type cueClass uint8

const (
	cueNone cueClass = iota
	// cueNoun names a code: "code", "PIN", "código", 验证码.
	cueNoun
	// cueQualifier makes a following or preceding noun a verification
	// code ("verification", "security", "one-time"); some also count on
	// their own.
	cueQualifier
	// cueVerb asks to use a number: "enter 482913 to verify".
	cueVerb
	// cueNotCode turns a noun into another kind of code (promo code,
	// postcode, error code): the number it names is not a code.
	cueNotCode
	// cueNumberOf, before a number, names what it is when it is not a
	// code: order, phone, total, tracking.
	cueNumberOf
	// cueUnit, right after a number, measures something: minutes,
	// points.
	cueUnit
	// cueCurrency, before or after a number, makes it an amount.
	cueCurrency
	// cuePromo marks a sentence about a sale: "20% off with code X".
	cuePromo
	// cueKindOf turns a code noun it is joined to into another kind of
	// code, as cueNotCode does, and says nothing on its own: "kode pos"
	// and "posta kodu" are postcodes, but "pos" is also a point of sale
	// and "posta" Italian for mail ("e-posta kodu", a code sent by e-mail,
	// is read by ePosta).
	cueKindOf
)

type cueWord struct {
	class    cueClass
	strength int // for nouns, qualifiers and verbs: how surely it means a code
}

// codeWords are matched as whole words, lowercased. Compounds ending in
// "code" (Bestätigungscode, postcode) are read by compoundCue.
var codeWords = func() map[string]cueWord {
	m := map[string]cueWord{}
	add := func(c cueWord, words ...string) {
		for _, w := range words {
			if _, dup := m[w]; dup {
				panic("mailparse: cue word listed twice: " + w)
			}
			m[w] = c
		}
	}
	add(cueWord{cueNoun, 2}, "code", "codes", "código", "codigo", "códigos", "codigos", "codice", "codici",
		"kod", "kodu", "kodun", "kode", "koden", "koodi", "код", "кода", "κωδικός", "κωδικό", "mã", "tan")
	// A password is a code only when qualified: "one-time password",
	// "mot de passe temporaire", "hasło jednorazowe". (French "mot de
	// passe" and Portuguese "palavra-passe" are pairCues.) Danish
	// "adgangskode" is a password too, not a code.
	add(cueWord{cueNoun, 0}, "password", "passwort", "contraseña", "senha", "kennwort", "wachtwoord", "sandi",
		"पासवर्ड", "clave", "hasło", "hasła", "hasłem", "lösenord", "lösenordet", "adgangskode", "kodeord",
		"passord", "passordet", "salasana", "salasanasi", "salasanan", "heslo", "hesla", "heslem", "şifre",
		"şifren", "şifreniz", "şifresi", "sifre", "sifreniz", "parola", "parolanız", "parolaniz")
	// One-time and temporary, which make a password (or a code) a
	// verification code; alone they say nothing ("einmalige Gebühr").
	add(cueWord{cueQualifier, 0}, "temporaire", "provisoire", "einmalig", "einmalige", "einmaliges",
		"einmaligen", "einmaliger", "temporär", "temporäre", "temporäres", "temporären", "temporärer",
		"vorläufig", "vorläufige", "vorläufiges", "vorläufigen", "vorläufiger", "temporal", "temporales",
		"provisional", "provisoria", "dinámica", "dinamica", "temporária", "temporaria", "provisória",
		"monouso", "temporanea", "temporaneo", "provvisoria", "provvisorio", "eenmalig", "eenmalige",
		"tijdelijk", "tijdelijke", "jednorazowe", "jednorazowy", "jednorazowa", "jednorazowego",
		"jednorazowym", "tymczasowe", "tymczasowy", "tymczasowa", "tymczasowego", "tymczasowym",
		"tillfälligt", "tillfällig", "tillfälliga", "midlertidig", "midlertidigt", "midlertidige",
		"kertakäyttöinen", "kertakäyttöisen", "väliaikainen", "väliaikaisen", "jednorázové", "jednorázový",
		"jednorázová", "jednorázového", "dočasné", "dočasný", "dočasná", "dočasného", "geçici", "gecici")
	// Czech, Slovak, Hungarian.
	add(cueWord{cueNoun, 2}, "kód", "kódu", "kódem", "kódom", "kódod", "kódja", "kódot", "kódját", "kódodat")
	add(cueWord{cueQualifier, 2}, "ověřovací", "overovací", "ellenőrző", "hitelesítő")
	add(cueWord{cueQualifier, 0}, "potvrzovací", "potvrdzovací", "bezpečnostní", "bezpečnostný",
		"přihlašovací", "prihlasovací", "jednorazový", "megerősítő", "biztonsági", "belépési",
		"bejelentkezési", "egyszeri")
	add(cueWord{cueNotCode, 0}, "slevový", "zľavový", "dárkový", "darčekový", "kupónový", "kedvezmény",
		"kuponkód", "kedvezménykód", "promóciós", "ajándék", "poštovní", "poštové", "postai")
	add(cueWord{cueNumberOf, 0}, "objednávka", "objednávky", "objednávku", "objednávkou", "číslo", "čísla",
		"psč", "zásilky", "zásielky", "rendelés", "rendelési", "rendelésszám", "rendelésed", "irányítószám",
		"telefonszám", "számla", "összeg")
	// Hindi
	add(cueWord{cueNoun, 2}, "कोड")
	add(cueWord{cueNoun, 3}, "ओटीपी", "पासकोड")
	add(cueWord{cueQualifier, 0}, "सुरक्षा", "पुष्टि", "पुष्टिकरण", "लॉगिन", "प्रमाणीकरण")
	// "पिन कोड" is a postcode.
	add(cueWord{cueNotCode, 0}, "पिन", "कूपन", "डाक", "रेफरल", "प्रोमो")
	add(cueWord{cueNumberOf, 0}, "ऑर्डर", "आर्डर", "नंबर", "संख्या", "क्रमांक", "फोन", "फ़ोन", "मोबाइल", "कीमत",
		"मूल्य", "राशि", "कुल", "ट्रैकिंग", "खाता", "कार्ड", "बुकिंग", "टिकट", "चालान", "रसीद")
	add(cueWord{cueCurrency, 0}, "रुपये", "रुपए", "रु")
	add(cueWord{cueUnit, 0}, "मिनट", "सेकंड", "घंटे")
	add(cueWord{cuePromo, 0}, "छूट", "ऑफर")
	// Indonesian, Turkish, Vietnamese
	add(cueWord{cueQualifier, 0}, "keamanan", "konfirmasi", "autentikasi", "otentikasi", "bảo")
	add(cueWord{cueNotCode, 0}, "kupon", "produk", "referal", "bưu", "sản", "quà")
	add(cueWord{cueKindOf, 0}, "pos", "posta")
	add(cueWord{cueNumberOf, 0}, "pesanan", "nomor", "resi", "telepon", "telp", "harga", "tagihan", "faktur",
		"rekening", "sipariş", "fiyat", "tutar", "kargo", "takip", "đơn", "vận", "điện", "giá", "tổng", "hóa",
		"hoá", "thẻ")
	add(cueWord{cueCurrency, 0}, "rp", "idr", "tl", "vnđ", "vnd", "đồng")
	add(cueWord{cueUnit, 0}, "menit", "detik", "dakika", "phút", "giây")
	add(cueWord{cuePromo, 0}, "diskon", "indirim", "khuyến", "giảm")
	add(cueWord{cueNoun, 3}, "pin", "otp", "passcode", "passcodes", "totp", "2fa", "mfa", "einmalcode",
		"einmalpasswort", "einmalkennwort", "engångslösenord", "engangspassord", "engangskodeord",
		"kertakäyttösalasana", "kertasalasana", "verificatiecode", "bestätigungscode", "sicherheitscode", "zugangscode",
		"anmeldecode", "verifizierungscode", "authentifizierungscode", "bevestigingscode",
		"beveiligingscode", "inlogcode")
	add(cueWord{cueQualifier, 2}, "verification", "verificación", "verificacion", "verificação", "verificacao",
		"vérification", "verifica", "verifizierung", "bestätigung", "weryfikacyjny", "weryfikacji",
		"doğrulama", "подтверждения", "проверочный", "xác", "verifikasi", "सत्यापन", "वेरिफिकेशन")
	add(cueWord{cueQualifier, 0}, "security", "login", "log-in", "signin", "sign-in", "access", "confirmation",
		"authentication", "temporary", "seguridad", "segurança", "seguranca", "sécurité", "securite",
		"acceso", "acesso", "accès", "connexion", "sicurezza", "accesso", "conferma", "confirmación",
		"confirmacion", "confirmação", "confirmacao", "sicherheit", "anmeldung", "zugang", "inicio",
		"identificación", "autenticación", "autenticação", "autenticazione", "authentification",
		"onay", "giriş", "bezpieczeństwa", "безопасности", "входа", "sms", "device", "recovery", "backup")
	add(cueWord{cueVerb, 1}, "verify", "confirm", "authenticate", "activate", "verificar", "confirmar",
		"vérifier", "confirmer", "bestätigen", "verifizieren", "bevestigen", "verificare", "confermare")
	add(cueWord{cueNotCode, 0}, "promotional", "promotion", "promocional", "gift", "referral", "invite",
		"invitation", "zip", "postal", "postale", "post", "postleitzahl", "area", "country", "dial", "bar",
		"qr", "source", "error", "status", "product", "item", "style", "dress", "bank", "color", "colour",
		"html", "hex", "reduction", "cupon", "authorization", "authorisation", "auth", "approval", "cvv",
		"cvc", "shipping", "redemption", "redeem", "license", "licence", "activation", "réservation")
	add(cueWord{cueNumberOf, 0}, "order", "orders", "invoice", "receipt", "ticket", "tickets", "tracking",
		"shipment", "package", "parcel", "phone", "tel", "telephone", "call", "fax", "mobile", "cell",
		"whatsapp", "price", "total", "subtotal", "amount", "balance", "paid", "qty", "quantity", "account",
		"acct", "card", "ending", "ref", "reference", "booking", "reservation", "flight", "room", "seat",
		"gate", "suite", "floor", "box", "postcode", "zipcode", "version", "build", "step", "page", "id",
		"no", "nr", "nº", "número", "numero", "nummer", "pedido", "commande", "bestellung", "rechnung",
		"facture", "factura", "fatura", "seguimiento", "suivi", "sendung", "sendungsnummer", "teléfono",
		"telefono", "téléphone", "telefon", "telefone", "precio", "prix", "preis", "preço", "customer",
		"member", "membership", "policy", "claim", "case", "incident", "patient", "employee", "loyalty",
		"isbn", "sku", "model", "serial", "vin", "unit", "apt", "apartment", "visa", "mastercard", "amex",
		"iban", "routing", "bic", "swift", "tax", "vat", "sort")
	add(cueWord{cueUnit, 0}, "minutes", "minute", "mins", "min", "minutos", "minuten", "hours", "hour",
		"days", "day", "seconds", "secs", "points", "credits", "items", "years", "km", "kg", "mb", "gb", "kb",
		"miles", "lbs", "percent", "people", "users", "members", "times", "words", "characters")
	add(cueWord{cueCurrency, 0}, "usd", "eur", "gbp", "jpy", "cny", "rmb", "chf", "cad", "aud", "inr", "brl",
		"mxn", "sek", "nok", "dkk", "pln", "dollars", "euros", "yen")
	add(cueWord{cuePromo, 0}, "off", "discount", "discounts", "coupon", "promo", "voucher", "checkout",
		"sale", "offer", "deal", "deals", "save", "savings", "shop", "rabatt", "descuento", "réduction",
		"remise", "desconto", "sconto", "promoción", "promocion", "promoção", "oferta", "offre", "angebot",
		"gutschein", "cupón", "cupom")
	return m
}()

// affixedWords are words of Arabic, Persian and Hebrew, which attach
// prefixes to them ("the", "and", "with", "for": الرمز, ورمزك, הקוד, לקוד)
// and in Arabic and Persian possessive suffixes (رمزك, کدتان). They are
// kept folded (see foldAffixed) and looked up without those (see
// affixStems), each stem once: a word is a cue, or the first of a pair.
var affixedWords = func() map[string]affixedCue {
	m := map[string]affixedCue{}
	add := func(c cueWord, words ...string) {
		for _, w := range words {
			f := string(foldAffixed(nil, w))
			if _, dup := m[f]; dup {
				panic("mailparse: cue word listed twice: " + w)
			}
			m[f] = affixedCue{cueWord: c, word: true}
		}
	}
	// Arabic and Persian (کد, تأیید).
	add(cueWord{cueNoun, 2}, "رمز", "كود", "کد")
	// كلمة المرور, كلمة السر: a password; الرقم السري: a PIN; رقم الطلب: an
	// order number.
	add(cueWord{cueNoun, 0}, "مرور", "سر", "رقم", "گذرواژه")
	add(cueWord{cueQualifier, 2}, "تحقق", "تأیید", "یکبار")
	add(cueWord{cueQualifier, 0}, "تأكيد", "توثيق", "مصادقة", "أمان", "دخول", "سري", "احراز", "ورود", "امنیتی")
	add(cueWord{cueNotCode, 0}, "تفعيل", "بريدي", "ترويجي", "كوبون", "قسيمة", "هدية", "منتج", "خطأ", "پستی",
		"رهگیری", "پیگیری", "ملی", "معرف")
	add(cueWord{cueNumberOf, 0}, "طلب", "طلبية", "هاتف", "جوال", "موبايل", "فاتورة", "شحنة", "تتبع", "سعر", "مبلغ",
		"إجمالي", "مجموع", "حساب", "بطاقة", "حجز", "مرجع", "مرجعي", "سفارش", "تلفن", "همراه", "قیمت", "فاکتور",
		"شماره")
	add(cueWord{cueUnit, 0}, "دقائق", "دقيقة", "ثانية", "ساعة", "ساعات")
	add(cueWord{cueCurrency, 0}, "ريال", "درهم", "دينار", "جنيه", "ليرة", "دولار", "تومان")
	add(cueWord{cuePromo, 0}, "خصم", "تخفیف", "عرض")
	// Hebrew.
	add(cueWord{cueNoun, 2}, "קוד")
	add(cueWord{cueNoun, 0}, "סיסמה", "סיסמא", "סיסמת")
	add(cueWord{cueQualifier, 2}, "אימות")
	add(cueWord{cueQualifier, 0}, "אישור", "אבטחה", "כניסה", "התחברות", "הזדהות", "סודי")
	add(cueWord{cueNotCode, 0}, "קופון", "הפעלה")
	add(cueWord{cueNumberOf, 0}, "מספר", "הזמנה", "טלפון", "נייד", "מחיר", "סכום", "משלוח", "מעקב", "חשבונית",
		"קבלה", "חשבון", "כרטיס", "אסמכתא", "מיקוד")
	add(cueWord{cueUnit, 0}, "דקות", "דקה", "שניות", "שעות")
	add(cueWord{cueCurrency, 0}, "שקל", "שקלים")
	add(cueWord{cuePromo, 0}, "הנחה", "מבצע", "שובר")
	// Pairs qualify a code together with the word after them, as
	// pairCues: لمرة واحدة and یک بار (one time), חד-פעמית (one-time).
	for w, next := range map[string][]string{
		"مره": {" واحدة", " واحده"},
		"يك":  {"\u200cبار", " بار"},
		"חד":  {"-פעמית", "\u05beפעמית", " פעמית", "-פעמי", "\u05beפעמי", " פעמי"},
	} {
		if _, dup := m[w]; dup {
			panic("mailparse: cue word listed twice: " + w)
		}
		m[w] = affixedCue{pair: next}
	}
	for w := range m {
		affixedLen[0], affixedLen[1] = min(affixedLen[0], len(w)), max(affixedLen[1], len(w))
	}
	return m
}()

type affixedCue struct {
	cueWord
	word bool     // the stem is a cue on its own
	pair []string // or with one of these after it
}

// affixedLen holds the shortest and the longest stem of affixedWords, in
// bytes: most stems a word gives are neither, and are not looked up.
var affixedLen = [2]int{1 << 30, 0}

// affixedScript reports the letters of the scripts of affixedWords.
func affixedScript(r rune) bool {
	return '\u0590' <= r && r <= '\u06ff' || '\ufb1d' <= r && r <= '\ufdff' || '\ufe70' <= r && r <= '\ufeff'
}

// foldAffixed appends w with the differences that spelling leaves open
// taken out: vowel points and other marks, the kashida, the forms of alef
// (أ إ آ), ى and Persian ی (ي), Persian ک (ك), ة (ه).
func foldAffixed(dst []byte, w string) []byte {
	for _, r := range w {
		switch {
		case 'ب' <= r && r <= 'ي' && r != 'ى' && r != 'ة' && r != '\u0640' || 'א' <= r && r <= 'ת':
			// The plain letters of Arabic and Hebrew, most of the
			// text: nothing to fold.
		case unicode.Is(unicode.Mn, r) || r == '\u0640':
			continue
		case r == 'أ' || r == 'إ' || r == 'آ' || r == 'ٱ':
			r = 'ا'
		case r == 'ى' || r == 'ی':
			r = 'ي'
		case r == 'ک':
			r = 'ك'
		case r == 'ة' || r == 'ۀ':
			r = 'ه'
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

var (
	// arabicPrefixes begins with none, the word as written, whose
	// suffixes are tried first.
	arabicPrefixes = []string{"", "وبال", "وال", "بال", "فال", "كال", "ولل", "لل", "ال", "و", "ب", "ل", "ف", "ك"}
	arabicSuffixes = []string{"كما", "كم", "كن", "ك", "ها", "هم", "ه", "نا", "ي", "تان"}
	hebrewPrefixes = "והבלמשכ"
)

// affixStems calls yield with w (folded) as written, then without the
// prefixes and suffixes its script attaches, longest first, while a stem
// of two letters or more is left; it stops when yield returns false.
func affixStems(w []byte, yield func(stem []byte) bool) {
	long := func(s []byte) bool { return len(s) >= 2*utf8.UTFMax || utf8.RuneCount(s) >= 2 }
	if !yield(w) {
		return
	}
	if r, _ := utf8.DecodeRune(w); '\u0590' <= r && r <= '\u05ff' {
		// Up to three of ו ה ב ל מ ש כ: ולהזמנה, שבקוד.
		s := w
		for range 3 {
			r, size := utf8.DecodeRune(s)
			if !strings.ContainsRune(hebrewPrefixes, r) || !long(s[size:]) {
				return
			}
			s = s[size:]
			if !yield(s) {
				return
			}
		}
		return
	}
	// Every suffix ends in one of these letters.
	last, _ := utf8.DecodeLastRune(w)
	suffixed := last == 'ك' || last == 'ه' || last == 'م' || last == 'ن' || last == 'ا' || last == 'ي'
	for _, p := range arabicPrefixes {
		s, ok := bytes.CutPrefix(w, []byte(p))
		if !ok || !long(s) {
			continue
		}
		if p != "" && !yield(s) {
			return
		}
		if !suffixed {
			continue
		}
		for _, x := range arabicSuffixes {
			if t, ok := bytes.CutSuffix(s, []byte(x)); ok && long(t) && !yield(t) {
				return
			}
		}
	}
}

// codeWordShapes rules out most words from their length and first and
// last letters, before they are lowercased and looked up: reading every
// word of a message is the bulk of looking for codes.
var codeWordShapes = func() (f wordShapes) {
	for w := range codeWords {
		f.add(w)
	}
	for w := range pairCues {
		f.add(w)
	}
	return f
}()

// pairCues are words that make a cue together with the words after
// them: "one-time", "single-use", वन टाइम, sekali pakai qualify a code on
// their own; "usage unique", "solo uso", "uso único", "tek kullanımlık"
// (single-use) only a noun they are joined to ("mot de passe à usage
// unique"); "mot de passe" and "palavra-passe" are passwords.
var pairCues = map[string][]pairCue{
	"one":     {{"-time", oneTime}, {" time", oneTime}, {"-use", oneTime}, {" use", oneTime}},
	"single":  {{"-use", oneTime}, {" use", oneTime}},
	"वन":      {{" टाइम", oneTime}, {"-टाइम", oneTime}},
	"sekali":  {{" pakai", oneTime}},
	"usage":   {{" unique", singleUse}},
	"solo":    {{" uso", singleUse}},
	"uso":     {{" único", singleUse}, {" unico", singleUse}},
	"tek":     {{" kullanımlık", singleUse}, {" kullanimlik", singleUse}, {" seferlik", singleUse}},
	"einmal":  {{"-passwort", cueWord{cueNoun, 3}}, {"-kennwort", cueWord{cueNoun, 3}}},
	"mot":     {{" de passe", password}},
	"mots":    {{" de passe", password}},
	"palavra": {{"-passe", password}, {" passe", password}},
}

type pairCue struct {
	next string
	cueWord
}

var (
	oneTime   = cueWord{cueQualifier, 2}
	singleUse = cueWord{cueQualifier, 0}
	password  = cueWord{cueNoun, 0}
)

// wordShapes holds, per length and first letter, the last letters of a
// set of words; anything that is not an ASCII letter shares one slot. It
// may answer "maybe" for a word not in the set, never "no" for one in it;
// an ASCII word may be in any case.
type wordShapes [32][27]uint32

func letterSlot(c byte) int {
	if c |= 0x20; 'a' <= c && c <= 'z' {
		return int(c - 'a')
	}
	return 26
}

func (f *wordShapes) add(w string) {
	f[min(len(w), 31)][letterSlot(w[0])] |= 1 << letterSlot(w[len(w)-1])
}

func (f *wordShapes) mayHave(first, last byte, n int) bool {
	return f[min(n, 31)][letterSlot(first)]&(1<<letterSlot(last)) != 0
}

// unspacedCues are matched inside runs of Chinese, Japanese, Korean and
// Thai text, which do not separate words (or, in Korean, join particles
// to them: 인증번호는).
var unspacedCues = func() []unspacedCue {
	var cues []unspacedCue
	add := func(c cueWord, words ...string) {
		for _, w := range words {
			cues = append(cues, unspacedCue{w, c})
		}
	}
	add(cueWord{cueNoun, 3}, "验证码", "驗證碼", "校验码", "校驗碼", "动态码", "動態碼", "确认码", "確認碼",
		"安全码", "安全碼", "登录码", "认证码", "一次性密码", "动态密码", "動態密碼", "認証コード", "確認コード",
		"認証番号", "ワンタイムパスワード", "セキュリティコード", "ログインコード", "ワンタイムコード", "検証コード",
		"暗証番号", "인증번호", "인증코드", "확인코드", "보안코드")
	add(cueWord{cueNoun, 2}, "コード", "코드", "代码")
	add(cueWord{cueQualifier, 2}, "인증")
	add(cueWord{cueQualifier, 0}, "보안", "로그인")
	add(cueWord{cueNotCode, 0}, "クーポン", "プロモーション", "쿠폰")
	add(cueWord{cuePromo, 0}, "割引", "优惠", "折扣", "할인")
	add(cueWord{cueNumberOf, 0}, "郵便番号", "邮编", "邮政编码", "订单", "訂單", "注文", "运单", "快递", "追跡",
		"お問い合わせ番号", "電話", "电话", "金額", "金额", "合計", "合计", "주문", "전화", "우편번호", "운송장",
		"송장", "배송", "결제", "금액", "합계", "가격", "고객센터", "예약", "계좌", "카드")
	add(cueWord{cueUnit, 0}, "分钟", "分間", "円", "元", "원")
	// Thai: รหัส is any code; the words after it say which (รหัสผ่าน is a
	// password, รหัสไปรษณีย์ a postcode).
	add(cueWord{cueNoun, 3}, "รหัสยืนยัน", "รหัสความปลอดภัย", "รหัสเข้าสู่ระบบ")
	add(cueWord{cueNoun, 2}, "รหัส")
	add(cueWord{cueNoun, 0}, "รหัสผ่าน")
	add(cueWord{cueQualifier, 2}, "ใช้ครั้งเดียว")
	add(cueWord{cueVerb, 1}, "ยืนยัน")
	add(cueWord{cueNotCode, 0}, "รหัสไปรษณีย์", "รหัสส่วนลด", "รหัสคูปอง", "รหัสโปรโมชั่น", "รหัสสินค้า", "คูปอง",
		"โปรโมชั่น")
	add(cueWord{cueNumberOf, 0}, "รหัสพัสดุ", "รหัสติดตาม", "รหัสอ้างอิง", "รหัสสมาชิก", "รหัสลูกค้า", "อ้างอิง",
		"หมายเลข", "เลขที่", "คำสั่งซื้อ", "พัสดุ", "โทร", "เบอร์", "ราคา", "ยอดรวม", "ยอดชำระ", "บัญชี", "บัตร")
	add(cueWord{cueUnit, 0}, "นาที", "วินาที", "บาท")
	add(cueWord{cuePromo, 0}, "ส่วนลด")
	return cues
}()

type unspacedCue struct {
	s string
	cueWord
}

// compoundSuffix reports a word of five or more bytes that may end in a
// word for code (see compoundCue); w is lowercase or ASCII.
func compoundSuffix[T string | []byte](w T) bool {
	if len(w) < 5 {
		return false
	}
	a, b, c := w[len(w)-3]|0x20, w[len(w)-2]|0x20, w[len(w)-1]|0x20
	return a == 'o' && b == 'd' && c == 'e' || a == 'd' && b == 'e' && c == 's' || a == 'k' && b == 'o' && c == 'd'
}

// compoundCue reads a word that ends in a word for code, as German and
// Dutch write them: Bestätigungscode is a verification code, Postcode and
// Gutscheincode are not codes.
func compoundCue(w string) (cueWord, bool) {
	var stem string
	for _, suffix := range []string{"codes", "code", "kode", "kod"} {
		if s, ok := strings.CutSuffix(w, suffix); ok && len(s) >= 2 {
			stem = s
			break
		}
	}
	if stem == "" {
		return cueWord{}, false
	}
	for _, neg := range []string{"post", "zip", "bar", "promo", "rabatt", "gutschein", "aktion", "gift",
		"geschenk", "qr", "quell", "source", "fehler", "error", "vorwahl", "area", "tracking", "sendung",
		"produkt", "artikel", "kortings", "rabat", "korting", "cadeau", "bon", "voucher", "coupon",
		"kunden", "vorteils", "status", "farb", "color", "dress"} {
		if strings.Contains(stem, neg) {
			return cueWord{cueNotCode, 0}, true
		}
	}
	for _, pos := range []string{"verif", "bestätig", "bestaetig", "sicherheit", "einmal", "zugang",
		"anmelde", "zugriff", "login", "logon", "sign", "auth", "bevestig", "beveilig", "toegang", "inlog", "pass",
		"sms", "otp", "pin", "confirm", "secur", "access", "bekräft", "bekraeft", "vahvistus", "weryfik",
		"potwierdz", "säkerhet", "engangs"} {
		if strings.Contains(stem, pos) {
			return cueWord{cueNoun, 3}, true
		}
	}
	return cueWord{cueNoun, 2}, true
}

// span is a byte range of the text being read.
type span struct{ start, end int }

type cueHit struct {
	span
	cueWord
}

type candidate struct {
	span
	length  int  // characters, separators left out
	digits  int  // how many of them are digits
	alnum   bool // letters too
	mixed   bool // lowercase letters among them
	spaced  bool // single digits set apart, "4 8 2 9 1 3"
	year    bool // 19xx or 20xx alone
	grouped bool
}

// codeFinder weighs the candidates of each text it is given.
type codeFinder struct {
	found  []foundCode
	order  int
	src    string
	cues   []cueHit
	cands  []candidate
	folded [48]byte
	// numbers is set while scan looks for candidates, clear while it
	// looks for cues.
	numbers bool
	// Room for the cues and candidates of an ordinary message; a finder
	// that grew past it for a long one keeps the larger room.
	cueBuf  [64]cueHit
	candBuf [32]candidate
}

type foundCode struct {
	Code
	score int
	order int // where it was first seen, across the texts in turn
}

// source reads one text: subject, text body or HTML lines. It looks for
// the cue words first, and then for candidates only around the cues that
// can make a code: most numbers of most messages are never weighed.
func (f *codeFinder) source(src string) {
	defer func() { f.order += len(src) }()
	if src == "" {
		return
	}
	f.src, f.cues, f.cands = src, f.cues[:0], f.cands[:0]
	f.numbers = false
	f.scan(0, len(src))
	f.resolveNouns()
	f.numbers = true
	done := 0
	for _, q := range f.cues {
		if !q.positive() {
			continue
		}
		lo, hi := max(q.start-farBytes, done), min(len(src), q.end+farBytes)
		if lo < hi {
			done = f.scan(f.chainStart(lo), hi)
		}
	}
	for _, c := range f.cands {
		score, cue, ok := f.score(c)
		if ok && score >= minCodeScore {
			f.keep(c, score, cue)
		}
	}
}

// positive reports a cue that can make a number a code.
func (q cueHit) positive() bool {
	return (q.class == cueNoun || q.class == cueVerb || q.class == cueQualifier) && q.strength > 0
}

// chainStart moves i back to the start of the word or group of numbers it
// falls in, so that a window never starts in the middle of a code.
func (f *codeFinder) chainStart(i int) int {
	for lo := max(0, i-24); i > lo; i-- {
		c := f.src[i-1]
		if !isASCIIAlnum(c) && c != ' ' && c != '-' && c < utf8.RuneSelf {
			break
		}
	}
	for i < len(f.src) && !utf8.RuneStart(f.src[i]) {
		i++
	}
	return i
}

// scan reads src[from:to] (and the end of a word that crosses to) for
// cue words, or with f.numbers for candidates; it returns where it stopped.
func (f *codeFinder) scan(from, to int) int {
	src := f.src
	i := from
	for i < to {
		c := src[i]
		if c < utf8.RuneSelf {
			switch {
			case 'a' <= c|0x20 && c|0x20 <= 'z':
				i = f.asciiWord(i)
			case '0' <= c && c <= '9' && !f.numbers:
				// Numbers are read in the second pass; "2FA" is a word.
				j := i + 1
				for j < len(src) && isASCIIAlnum(src[j]) {
					j++
				}
				if j-i <= 3 && j < len(src) && src[j] < utf8.RuneSelf {
					i = f.word(i)
				} else {
					i = j
				}
			case '0' <= c && c <= '9':
				i = f.word(i)
			default:
				i++
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(src[i:])
		switch {
		case unspacedCodeScript(r):
			j := i + size
			for j < len(src) {
				r, n := utf8.DecodeRuneInString(src[j:])
				if !unspacedCodeScript(r) {
					break
				}
				j += n
			}
			if !f.numbers {
				f.unspaced(i, j)
			}
			i = j
		case isWordRune(r) || otherDigit(r):
			i = f.word(i)
		default:
			i += size
		}
	}
	return i
}

// unspacedCodeScript reports the scripts whose cues are found inside runs
// of text (see unspaced): Chinese, Japanese, Korean (whose particles join
// the noun: 인증번호는) and Thai, which does not separate words.
func unspacedCodeScript(r rune) bool {
	switch {
	case r < '\u0e00':
		// Latin, Greek, Cyrillic, Hebrew, Arabic, Devanagari: most of
		// the non-ASCII text read.
		return false
	case r < '\u1100':
		// Thai, less the baht sign ฿, as unicode.Thai.
		return '\u0e01' <= r && r <= '\u0e3a' || '\u0e40' <= r && r <= '\u0e5b'
	case r <= '\u11ff', // Hangul Jamo
		'\u302e' <= r && r <= '\u302f',                                 // Hangul tone marks
		'\u3130' <= r && r <= '\u318f',                                 // Hangul Compatibility Jamo
		'\u3200' <= r && r <= '\u321e', '\u3260' <= r && r <= '\u327e', // parenthesized and circled Hangul
		'\ua960' <= r && r <= '\ua97f', // Hangul Jamo Extended-A
		'\uac00' <= r && r <= '\ud7ff', // Hangul Syllables, Jamo Extended-B
		'\uffa0' <= r && r <= '\uffdc': // half-width Hangul
		return true
	}
	return unspacedScript(r)
}

func fullwidthDigit(r rune) bool { return '０' <= r && r <= '９' }

// otherDigit reports the digits read like ASCII ones in a code: full-width,
// Arabic-Indic (٤٨٢٩١٣) and Persian (۴۸۲۹۱۳); digitValue gives their value.
func otherDigit(r rune) bool {
	return fullwidthDigit(r) || '٠' <= r && r <= '٩' || '۰' <= r && r <= '۹'
}

func digitValue(r rune) byte {
	switch {
	case fullwidthDigit(r):
		return byte('0' + r - '０')
	case '٠' <= r && r <= '٩':
		return byte('0' + r - '٠')
	case '۰' <= r && r <= '۹':
		return byte('0' + r - '۰')
	}
	return byte(r)
}

// wordEnd returns the end of the word starting at i: letters (not of the
// unspaced scripts), digits, combining marks.
func (f *codeFinder) wordEnd(i int) (end, digits, letters int, other bool) {
	src := f.src
	for i < len(src) {
		c := src[i]
		if c < utf8.RuneSelf {
			switch {
			case '0' <= c && c <= '9':
				digits++
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
				letters++
			default:
				return i, digits, letters, other
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(src[i:])
		switch {
		case otherDigit(r):
			digits++
		case unspacedCodeScript(r):
			return i, digits, letters, other
		case commonLetter(r) || unicode.IsLetter(r) || unicode.IsDigit(r) ||
			r >= '\u0300' && unicode.In(r, unicode.Mn, unicode.Mc):
			// "código", कोड (whose vowel signs are marks), or digits
			// of another script.
			other = true
		default:
			return i, digits, letters, other
		}
		i += size
	}
	return i, digits, letters, other
}

// commonLetter reports the basic letters of Greek, Cyrillic, Hebrew and
// Arabic without a look in Unicode's tables; marks start at U+0300.
func commonLetter(r rune) bool {
	return '\u0391' <= r && r <= '\u03c9' && r != '\u03a2' || '\u0400' <= r && r <= '\u045f' ||
		'\u05d0' <= r && r <= '\u05ea' || '\u0621' <= r && r <= '\u064a' && r != '\u0640'
}

// asciiWord reads a word that starts with an ASCII letter. Most words of
// most messages are plain ASCII and no cue: those are passed over here
// with a glance at a few of their bytes; the others go to word.
func (f *codeFinder) asciiWord(i int) int {
	src := f.src
	j := i + 1
	for j < len(src) && 'a' <= src[j]|0x20 && src[j]|0x20 <= 'z' {
		j++
	}
	if i > 0 && src[i-1] == '@' {
		return f.word(i)
	}
	if j < len(src) {
		switch c := src[j]; {
		case c >= utf8.RuneSelf, '0' <= c && c <= '9', c == '@',
			c == ':' && strings.HasPrefix(src[j:], "://"), c == '.' && j-i == 3:
			return f.word(i)
		case f.numbers && c == '-':
			return f.word(i) // "ABC-123"
		}
	}
	if f.numbers {
		return j
	}
	w := src[i:j]
	if len(w) > len(f.folded) || !compoundSuffix(w) && !codeWordShapes.mayHave(w[0], w[len(w)-1], len(w)) {
		return j
	}
	return f.word(i)
}

// word reads the word at i and returns where reading goes on.
func (f *codeFinder) word(i int) int {
	src := f.src
	j, digits, letters, other := f.wordEnd(i)
	if j == i {
		// Not a word after all: step over the character.
		_, size := utf8.DecodeRuneInString(src[i:])
		return i + size
	}
	// Addresses and URLs are not read: their numbers are not codes.
	if strings.HasPrefix(src[j:], "://") || (j < len(src) && src[j] == '@') ||
		(i > 0 && src[i-1] == '@') || (j-i == 3 && strings.EqualFold(src[i:j], "www") && j < len(src) && src[j] == '.') {
		return skipToSpace(src, j)
	}
	// A short word of letters and digits may be the first group of a
	// code ("K7Q-2XM"); otherwise it is read as a word ("2FA").
	if digits > 0 && !other && (letters == 0 || digits+letters >= 4 || strings.HasPrefix(src[j:], "-")) {
		if !f.numbers {
			return j
		}
		return f.number(i, j, letters > 0)
	}
	if f.numbers {
		return j
	}
	w := src[i:j]
	if len(w) > len(f.folded) {
		return j
	}
	if r, _ := utf8.DecodeRuneInString(w); affixedScript(r) {
		return f.affixedWord(i, j)
	}
	lw := appendLower(f.folded[:0], w)
	compound := compoundSuffix(lw)
	if !compound && !codeWordShapes.mayHave(lw[0], lw[len(lw)-1], len(lw)) {
		return j
	}
	end := j
	cw, ok := codeWords[string(lw)]
	if !ok && compound {
		cw, ok = compoundCue(string(lw))
	}
	if !ok {
		// "one-time", "single-use", "mot de passe": the pair is the cue.
		for _, p := range pairCues[string(lw)] {
			if hasPrefixFold(src[j:], p.next) {
				cw, end, ok = p.cueWord, j+len(p.next), true
				break
			}
		}
	}
	if !ok || cw.class == cueKindOf && ePosta(src, i) {
		return j
	}
	if len(f.cues) < maxCues {
		f.cues = append(f.cues, cueHit{span{i, end}, cw})
	}
	return end
}

// ePosta reports "posta" at i written as part of "e-posta", the Turkish
// for e-mail: "E-posta kodu" is a code sent by e-mail, not a postcode.
func ePosta(src string, i int) bool {
	return i >= 2 && src[i-1] == '-' && src[i-2]|0x20 == 'e' && (i == 2 || !isASCIIAlnum(src[i-3])) &&
		strings.EqualFold(src[i:min(len(src), i+5)], "posta")
}

// affixedWord reads the word of Arabic, Persian or Hebrew at [i, j) (see
// affixedWords) and returns where reading goes on.
func (f *codeFinder) affixedWord(i, j int) int {
	end := j
	var cw cueWord
	ok := false
	affixStems(foldAffixed(f.folded[:0], f.src[i:j]), func(stem []byte) bool {
		if len(stem) < affixedLen[0] || len(stem) > affixedLen[1] {
			return true
		}
		a, found := affixedWords[string(stem)]
		if !found {
			return true
		}
		if a.word {
			cw, ok = a.cueWord, true
			return false
		}
		for _, next := range a.pair {
			if strings.HasPrefix(f.src[j:], next) {
				cw, end, ok = cueWord{cueQualifier, 2}, j+len(next), true
				return false
			}
		}
		return true
	})
	if ok && len(f.cues) < maxCues {
		f.cues = append(f.cues, cueHit{span{i, end}, cw})
	}
	return end
}

func skipToSpace(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) || r == '<' || r == '>' || r == '"' || r == ')' {
			return i
		}
		i += size
	}
	return i
}

// unspaced finds the cues inside a run of Chinese, Japanese or Korean
// text, in order; a cue inside a longer one (コード in 認証コード) gives way.
func (f *codeFinder) unspaced(i, j int) {
	run := f.src[i:j]
	first := len(f.cues)
	for _, u := range unspacedCues {
		for off := 0; len(f.cues) < maxCues; {
			k := strings.Index(run[off:], u.s)
			if k < 0 {
				break
			}
			k += off
			f.cues = append(f.cues, cueHit{span{i + k, i + k + len(u.s)}, u.cueWord})
			off = k + len(u.s)
		}
	}
	found := f.cues[first:]
	slices.SortFunc(found, func(a, b cueHit) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end))
	})
	kept := found[:0]
	for _, q := range found {
		if len(kept) > 0 && q.end <= kept[len(kept)-1].end {
			continue
		}
		kept = append(kept, q)
	}
	f.cues = f.cues[:first+len(kept)]
}

// groupSeparator reports the characters that set groups of a code apart:
// space, no-break spaces, hyphens.
func groupSeparator(r rune) bool {
	switch r {
	case ' ', '-', '\u00a0', '\u2009', '\u202f', '\u2011':
		return true
	}
	return false
}

// number reads the number or code at [i, j) with the groups that follow
// it, records it if it can be a code, and returns its end.
func (f *codeFinder) number(i, j int, alnum bool) int {
	src := f.src
	var buf [10]span
	groups := append(buf[:0], span{i, j})
	var sep rune
	end := j
	for len(groups) < len(buf) && end < len(src) {
		r, size := utf8.DecodeRuneInString(src[end:])
		if !groupSeparator(r) || (sep != 0 && r != sep) {
			break
		}
		k, digits, letters, other := f.wordEnd(end + size)
		if k == end+size || other || (!alnum && letters > 0) || (alnum && r != '-') || digits+letters > 10 {
			break
		}
		if r == ' ' && letters > 0 {
			break
		}
		sep = r
		groups = append(groups, span{end + size, k})
		end = k
	}
	c, ok := f.shape(groups)
	if !ok || !f.bounded(i, end) {
		return end
	}
	c.span = span{i, end}
	if len(f.cands) < maxCodeCandidates {
		f.cands = append(f.cands, c)
	}
	return end
}

// shape decides whether groups of characters can form a code, and its value.
func (f *codeFinder) shape(groups []span) (candidate, bool) {
	var c candidate
	letters := 0
	for _, g := range groups {
		for _, r := range f.src[g.start:g.end] {
			switch {
			case otherDigit(r), '0' <= r && r <= '9':
				c.digits++
			case 'a' <= r && r <= 'z':
				c.mixed = true
				letters++
			default:
				letters++
			}
		}
	}
	n := c.digits + letters
	c.alnum = letters > 0
	if n < 4 || n > 10 || c.digits == 0 {
		return c, false
	}
	if len(groups) > 1 {
		single := true
		for _, g := range groups {
			single = single && g.end-g.start == 1
		}
		switch {
		case single && !c.alnum && len(groups) >= 4 && len(groups) <= 8:
			c.spaced = true
		case single || len(groups) > 3:
			return c, false
		default:
			first := groups[0].end - groups[0].start
			for _, g := range groups {
				if size := g.end - g.start; size != first || size < 2 || size > 5 {
					return c, false // 555-0132 and 2024-05-14 are not codes
				}
			}
			c.grouped = true
		}
	}
	c.length = n
	if g := groups[0]; len(groups) == 1 && !c.alnum && n == 4 {
		v := codeValue(f.src[g.start:g.end])
		c.year = strings.HasPrefix(v, "19") || strings.HasPrefix(v, "20")
	}
	return c, true
}

// bounded checks the characters around [i, j): a code does not follow a
// currency sign, a "#" or a "+", and is not part of a decimal number, a
// time, a date, a path or a percentage.
func (f *codeFinder) bounded(i, j int) bool {
	src := f.src
	if i > 0 {
		p, size := utf8.DecodeLastRuneInString(src[:i])
		switch {
		case p == '#' || p == '№' || p == '+' || p == '/' || p == '\\' || p == '=' || p == '&' ||
			p == '?' || p == '_' || p == '@' || p == '%' || p == '٪' || p == '.' || p == '$' || p == '*' || p == '~':
			return false
		case unicode.Is(unicode.Sc, p):
			return false
		case (p == ',' || p == ':' || p == '-' || p == '٫' || p == '٬' || p == '،') && i-size > 0 && isDigitBefore(src, i-size):
			return false
		case p == ' ' && i-size > 0:
			if q, _ := utf8.DecodeLastRuneInString(src[:i-size]); unicode.Is(unicode.Sc, q) || q == '#' || q == '*' {
				return false
			}
		}
	}
	if j < len(src) {
		n, size := utf8.DecodeRuneInString(src[j:])
		switch {
		case n == '%' || n == '٪' || n == '/' || n == '\\' || n == '@' || n == '_' || n == '=' || n == '+' || n == '*':
			return false
		case unicode.Is(unicode.Sc, n):
			return false
		case (n == '.' || n == ',' || n == ':' || n == '-' || n == '٫' || n == '٬' || n == '،') && j+size < len(src) && isDigitAt(src, j+size):
			return false
		case n == ' ' && j+size < len(src):
			if q, _ := utf8.DecodeRuneInString(src[j+size:]); unicode.Is(unicode.Sc, q) || q == '%' || q == '٪' {
				return false
			}
		}
	}
	return true
}

func isDigitBefore(s string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return unicode.IsDigit(r)
}

func isDigitAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsDigit(r)
}

// resolveNouns reads each noun with the word before or after it:
// "verification code", "código de verificación" name a verification code
// (and the cue then spans both words); "promo code", "code postal" name
// something else.
func (f *codeFinder) resolveNouns() {
	for n := range f.cues {
		q := &f.cues[n]
		if q.class != cueNoun {
			continue
		}
		settled := false
		for m := n - 1; m >= 0 && m >= n-2 && !settled; m-- {
			p := f.cues[m]
			if !f.joined(p.end, q.start, false) {
				break
			}
			settled = f.qualify(q, p)
		}
		if settled {
			continue // by the word before it: "verification code for order 4821 is 9931"
		}
		for m := n + 1; m < len(f.cues) && m <= n+2 && !settled; m++ {
			p := f.cues[m]
			if !f.joined(q.end, p.start, true) {
				break
			}
			settled = f.qualify(q, p)
		}
	}
}

// qualify applies a neighbouring word p to the noun q; it reports whether
// p was a qualifier of either kind.
func (f *codeFinder) qualify(q *cueHit, p cueHit) bool {
	switch p.class {
	case cueQualifier:
		q.strength = 3
		q.span = span{min(q.start, p.start), max(q.end, p.end)}
		return true
	case cueNumberOf:
		// A word run into a noun that already names a verification code
		// says what the code is for, not what kind of number it is:
		// 카드 결제 인증번호 is a card payment's verification number, where
		// 결제금액 and 계좌번호 are an amount and an account number.
		if q.strength < 3 || !f.unspacedNoun(q.span) {
			q.class = cueNotCode
		}
		return true
	case cueNotCode, cueKindOf, cuePromo, cueCurrency:
		q.class = cueNotCode
		return true
	}
	return false
}

// unspacedNoun reports a noun found inside unspaced text (see unspaced),
// which holds its qualifier within it: 인증번호, 验证码, รหัสยืนยัน.
func (f *codeFinder) unspacedNoun(q span) bool {
	r, _ := utf8.DecodeRuneInString(f.src[q.start:q.end])
	return unspacedCodeScript(r)
}

// joined reports whether the text between two words joins them into one
// phrase: a space or hyphen, or, when linking allows it, a short word
// such as "de", "di", "zur", "für" ("código de verificación").
func (f *codeFinder) joined(a, b int, linking bool) bool {
	if a > b || b-a > 12 {
		return false
	}
	gap := strings.TrimSpace(f.src[a:b])
	gap = strings.Trim(gap, "-")
	if gap == "" {
		return true
	}
	if !linking {
		return false
	}
	switch strings.ToLower(gap) {
	case "de", "di", "do", "da", "du", "zur", "zum", "für", "de la", "del", "d'", "de l'", "de un", "à":
		return true
	}
	return false
}

// gap describes the text between two positions.
type gap struct {
	runes     int  // characters, white space runs counted as one
	sentence  bool // a sentence ends in it
	sentences int  // how many
	paragraph int  // blank lines in it
	lines     int  // line breaks in it
}

func (f *codeFinder) gap(a, b int) gap {
	var g gap
	s := f.src[a:b]
	space, newlines := false, 0
	prev := rune(0)
	for i := 0; i < len(s) && g.runes <= maxGapRunes; {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
		switch {
		case r == '\n':
			newlines++
			g.lines++
			if newlines == 2 {
				g.paragraph++
			}
			space = true
		case r == ' ' || r == '\t' || r == '\r' || r >= utf8.RuneSelf && unicode.IsSpace(r):
			if (prev == '.' || prev == '!' || prev == '?') && !space {
				g.sentence = true
				g.sentences++
			}
			space = true
		default:
			if space {
				g.runes++
			}
			space, newlines = false, 0
			g.runes++
			switch r {
			case '。', '！', '？':
				g.sentence = true
				g.sentences++
			}
		}
		prev = r
	}
	return g
}

// alone reports whether the candidate stands alone on its line, give or
// take punctuation: a code set in its own table cell or paragraph.
func (f *codeFinder) alone(c candidate) bool {
	lineStart := strings.LastIndexByte(f.src[:c.start], '\n') + 1
	lineEnd := strings.IndexByte(f.src[c.end:], '\n')
	if lineEnd < 0 {
		lineEnd = len(f.src)
	} else {
		lineEnd += c.end
	}
	bare := func(s string) bool {
		for _, r := range s {
			if !(r == ' ' || r == '\t' || r == '\r' || r < utf8.RuneSelf && unicode.IsPunct(r) ||
				r >= utf8.RuneSelf && (unicode.IsSpace(r) || unicode.IsPunct(r) || invisible(r))) {
				return false
			}
		}
		return true
	}
	return bare(withoutCodePrefix(f.src[lineStart:c.start])) && bare(f.src[c.end:lineEnd])
}

// withoutCodePrefix drops the sender's prefix that may stand before a code
// ("G-" of G-482913, "ACM-"): one to five capital letters and a hyphen
// that end before.
func withoutCodePrefix(before string) string {
	rest, ok := strings.CutSuffix(before, "-")
	if !ok {
		return before
	}
	i := len(rest)
	for i > 0 && 'A' <= rest[i-1] && rest[i-1] <= 'Z' {
		i--
	}
	if n := len(rest) - i; n < 1 || n > 5 || i > 0 && wordBefore([]byte(rest), i) {
		return before
	}
	return rest[:i]
}

// score weighs a candidate against the cues around it: the strength of the
// best cue (a noun that names a verification code 3, another noun 2, a
// verb 1), how closely it is tied to it, and the candidate's shape. A
// closer word that makes it another kind of number, or a sale in the same
// sentence, rules it out.
func (f *codeFinder) score(c candidate) (int, span, bool) {
	// Only the cues nearest the candidate on either side are weighed, so
	// that text crowded with cue words costs no more than a few per number.
	k, _ := slices.BinarySearchFunc(f.cues, c.start, func(q cueHit, at int) int { return cmp.Compare(q.start, at) })
	lo, hi := max(0, k-nearCues), min(len(f.cues), k+nearCues)
	near := f.cues[lo:hi]
	// Whether it stands alone is worth a point: read the line only when
	// some cue could reach the score with it.
	bonus := shapeBonus(c)
	reachable := false
	for _, q := range near {
		if q.strength > 0 && q.strength+1+bonus+1 >= minCodeScore {
			reachable = true
			break
		}
	}
	if !reachable {
		return 0, span{}, false
	}
	isAlone := f.alone(c)
	if isAlone {
		bonus++
	}
	best, bestDist, bestBefore, bestCue := -100, 1<<30, false, span{}
	notDist := 1 << 30
	for _, q := range near {
		if q.end <= c.start && c.start-q.end > farBytes || q.start >= c.end && q.start-c.end > farBytes {
			continue
		}
		switch q.class {
		case cueNoun, cueVerb, cueQualifier:
			// A cue that cannot win even at its closest is not weighed.
			if q.strength == 0 || q.strength+1+bonus < minCodeScore || q.strength+1 < best {
				continue
			}
			prox, dist, ok := f.proximity(q.span, c, isAlone)
			if !ok {
				continue
			}
			// On a tie the nearer cue wins, and one before the code
			// ("your code is") over one after it.
			before := q.end <= c.start
			s := q.strength + prox
			if s > best || s == best && (before && !bestBefore || before == bestBefore && dist < bestDist) {
				best, bestDist, bestBefore, bestCue = s, dist, before, q.span
			}
		case cueNotCode, cueNumberOf, cueUnit, cueCurrency:
			if d, ok := f.tiedTo(q, c); ok {
				notDist = min(notDist, d)
			}
		case cuePromo:
			if f.sameSentence(q.span, c.span) {
				return 0, span{}, false
			}
		}
	}
	if best == -100 || notDist <= bestDist {
		return 0, span{}, false
	}
	return best + bonus, bestCue, true
}

// shapeBonus weighs what a candidate looks like: six digits is the most
// common code; nine or ten digits, lowercase letters or a year less so.
func shapeBonus(c candidate) int {
	b := 0
	switch {
	case c.spaced:
	case !c.alnum && c.digits == 6:
		b++
	case !c.alnum && c.digits >= 9:
		b--
	case c.alnum && (c.mixed || c.length >= 9):
		b--
	}
	if c.year {
		b--
	}
	return b
}

// proximity is how closely a cue is tied to a candidate: a bonus for a
// cue right before or after it in the same sentence, none for one further
// off in the same sentence or a line or paragraph away from a candidate
// that stands alone, a penalty across a sentence end. dist is the number
// of characters between them.
func (f *codeFinder) proximity(q span, c candidate, isAlone bool) (prox, dist int, ok bool) {
	if q.end <= c.start {
		g := f.gap(q.end, c.start)
		sameSentence := g.paragraph == 0 && !g.sentence
		switch {
		case sameSentence && g.runes <= 15:
			return 1, g.runes, true
		case sameSentence && g.runes <= 60:
			return 0, g.runes, true
		case sameSentence && g.runes <= 100:
			return -1, g.runes, true
		case isAlone && g.paragraph <= 1 && g.runes <= 200:
			return 0, g.runes, true
		case g.paragraph == 0 && g.runes <= 30:
			return -1, g.runes, true
		}
		return 0, 0, false
	}
	if q.start >= c.end && !f.labels(q) {
		// A cue followed by a colon is for what follows it: in "4417 Auth
		// code: 004821" it is not tied to 4417.
		g := f.gap(c.end, q.start)
		switch {
		case g.paragraph == 0 && g.lines == 0 && !g.sentence && g.runes <= 12:
			return 1, g.runes, true
		case g.paragraph == 0 && !g.sentence && g.runes <= 40:
			return 0, g.runes, true
		case isAlone && g.paragraph <= 1 && g.runes <= 100:
			return 0, g.runes, true
		case g.paragraph == 0 && g.lines <= 1 && g.sentences == 1 && g.runes <= 40:
			// The very next sentence may say what the number was: "Enter
			// 302918 to continue. This is your authentication code." Only
			// a cue that names a verification code outright (3) gets a
			// number through from there, with its usual shape.
			return -1, g.runes, true
		}
	}
	return 0, 0, false
}

// labels reports whether a cue is followed by a colon, so that it labels
// what comes after it.
func (f *codeFinder) labels(q span) bool {
	rest := strings.TrimLeft(f.src[q.end:], " \t\u00a0")
	return strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "：")
}

// tiedTo reports whether a word that makes the candidate another kind of
// number is tied to it, and how many characters lie between them: a label
// just before it on its line with no other number between ("Order number:
// 48213", "promo code SAVE20"), a unit right after it ("4821 dollars").
func (f *codeFinder) tiedTo(q cueHit, c candidate) (int, bool) {
	if q.class != cueUnit && q.end <= c.start {
		if c.start-q.end > 40 {
			return 0, false
		}
		g := f.gap(q.end, c.start)
		if g.paragraph > 0 || g.lines > 0 || g.sentence || g.runes > 20 ||
			strings.ContainsFunc(f.src[q.end:c.start], unicode.IsDigit) {
			return 0, false
		}
		return g.runes, true
	}
	if (q.class == cueUnit || q.class == cueCurrency) && q.start >= c.end && q.start-c.end <= 4 &&
		strings.TrimFunc(f.src[c.end:q.start], func(r rune) bool { return r == ' ' || r == '\u00a0' || r == '-' }) == "" {
		return 0, true
	}
	return 0, false
}

// sameSentence reports whether two spans are in one sentence.
func (f *codeFinder) sameSentence(a, b span) bool {
	lo, hi := a, b
	if b.start < a.start {
		lo, hi = b, a
	}
	if hi.start < lo.end {
		return true
	}
	if hi.start-lo.end > farBytes {
		return false
	}
	g := f.gap(lo.end, hi.start)
	return !g.sentence && g.paragraph == 0 && g.lines <= 1
}

// keep records a code found in the current text, merging it with the same
// value found before.
func (f *codeFinder) keep(c candidate, score int, cue span) {
	order := f.order + c.start
	value := codeValue(f.src[c.start:c.end])
	for i := range f.found {
		if f.found[i].Value == value {
			if score > f.found[i].score {
				f.found[i].score = score
				f.found[i].Context = f.context(c.span, cue)
			}
			return
		}
	}
	f.found = append(f.found, foundCode{Code{value, f.context(c.span, cue)}, score, order})
}

// codeValue is a code as written without its group separators, full-width,
// Arabic-Indic and Persian digits made ASCII.
func codeValue(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case groupSeparator(r):
		case otherDigit(r):
			b.WriteByte(digitValue(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (f *codeFinder) result() []Code {
	if len(f.found) == 0 {
		return nil
	}
	slices.SortStableFunc(f.found, func(a, b foundCode) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.order, b.order))
	})
	out := make([]Code, 0, min(len(f.found), maxCodes))
	for _, fc := range f.found[:min(len(f.found), maxCodes)] {
		out = append(out, fc.Code)
	}
	return out
}

// context is the text around a code, up to contextRunes characters with
// white space collapsed: the code and its cue, then as much on either side
// as fits, cut at word boundaries.
func (f *codeFinder) context(c, cue span) string {
	lo, hi := c.start, c.end
	if cue.end > cue.start {
		lo, hi = min(lo, cue.start), max(hi, cue.end)
	}
	core := collapseSpace(f.src[lo:hi])
	if utf8.RuneCountInString(core) > contextRunes {
		lo, hi = c.start, c.end
		core = collapseSpace(f.src[lo:hi])
	}
	room := contextRunes - utf8.RuneCountInString(core)
	left := collapseSpace(f.src[max(0, lo-4*contextRunes):lo])
	right := collapseSpace(f.src[hi:min(len(f.src), hi+4*contextRunes)])
	nl, nr := utf8.RuneCountInString(left), utf8.RuneCountInString(right)
	takeL := min(nl, room/2)
	takeR := min(nr, room-takeL)
	takeL = min(nl, room-takeR)
	left = lastRunes(left, takeL)
	right = firstRunes(right, takeR)
	// Cut a word the window split, unless that would leave nothing.
	if takeL < nl {
		if i := strings.IndexByte(left, ' '); i >= 0 {
			left = left[i+1:]
		}
	}
	if takeR < nr {
		if i := strings.LastIndexByte(right, ' '); i >= 0 {
			right = right[:i]
		}
	}
	return strings.TrimSpace(left + core + right)
}

// collapseSpace turns runs of white space into one space, keeping an edge
// space so that joined pieces stay apart.
func collapseSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || invisible(r) && r != '\u200d' {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	if space {
		b.WriteByte(' ')
	}
	return b.String()
}

func lastRunes(s string, n int) string {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

func firstRunes(s string, n int) string {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}
