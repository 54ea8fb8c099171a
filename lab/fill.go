package lab

import (
	"regexp"
)

// placeholderRE is a placeholder in a lesson's text: {metric_key} for a
// measured figure or a setting the run used, {@role} for the actor who
// played a role.
var placeholderRE = regexp.MustCompile(`\{(@?[a-z0-9_]+)\}`)

// Unknown is what [Result.Fill] puts where the run did not measure a figure
// or cast a role: a text never states what the run did not show.
const Unknown = "?"

// Fill puts the run's own figures and actors in text, a lesson's template:
// each {key} becomes the measured metric as reports print numbers, or else
// the setting the run recorded under key ([Result.SetSetting]); each
// {@role} the actor [Result.Cast] names for the role; and any of them
// becomes [Unknown] when the run did not measure, set or cast it.
func (r *Result) Fill(text string) string {
	return ReplacePlaceholders(text, func(key string) string {
		if key[0] == '@' {
			if who, ok := r.Cast[key[1:]]; ok && who != "" {
				return who
			}
			return Unknown
		}
		if v, ok := r.Metric(key); ok {
			return FormatNumber(v)
		}
		if v, ok := r.Settings[key]; ok && v != "" {
			return v
		}
		return Unknown
	})
}

// Missing lists the placeholders of text that r cannot fill: what a text
// would state that the run did not show.
func (r *Result) Missing(text string) []string {
	var out []string
	for _, key := range Placeholders(text) {
		if r.Fill("{"+key+"}") == Unknown {
			out = append(out, key)
		}
	}
	return out
}

// ReplacePlaceholders is text with each placeholder replaced by what
// value returns for its key ("@role" or "metric_key", braces dropped).
func ReplacePlaceholders(text string, value func(key string) string) string {
	return placeholderRE.ReplaceAllStringFunc(text, func(m string) string { return value(m[1 : len(m)-1]) })
}

// Placeholders lists the placeholders in text, braces dropped ("@role",
// "metric_key"), in order.
func Placeholders(text string) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// SetCast records who played role in the run.
func (r *Result) SetCast(role, actor string) {
	if r.Cast == nil {
		r.Cast = map[string]string{}
	}
	r.Cast[role] = actor
}

// SetSetting records, as text, a setting the run used (an option such as a
// busy timeout or a lease length, as it ran), for texts that quote it as
// {key}.
func (r *Result) SetSetting(key, value string) {
	if r.Settings == nil {
		r.Settings = map[string]string{}
	}
	r.Settings[key] = value
}
