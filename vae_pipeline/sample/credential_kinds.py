"""Fake credentials of every kind the widely used secret scanners know, one per kind.

The kinds are the rule ids of gitleaks' default configuration and the common trufflehog
detectors (used only as the list of what to cover), plus the shapes contract 3 names on its own:
secret-named assignments, URL and `curl -u` passwords, Basic and `token` headers, SigV4 key ids
and a private-key block with no END line. Each value is written here from the provider's
published token format — its prefix, alphabet and length — and drawn at random from the
generator's seed: nothing is taken from another project's test data, nor from the pipeline's own
rule table, so a test planting these checks the scrub against an independent list.

A format is a template: literal text with `{Xn}` for n random characters of alphabet X (below).
`name` is the variable a harness would keep the value in; it is also the key of the assignment,
the header and the sentence the value is planted in, which is how the keyword-anchored kinds (a
bare 32-hex string is only an Adafruit key next to the word) are recognised.
"""

from __future__ import annotations

import base64
import random
import re
import string
from dataclasses import dataclass

ALPHABETS = {
    "h": "0123456789abcdef",
    "H": "0123456789ABCDEF",
    "d": string.digits,
    "a": string.ascii_lowercase + string.digits,
    "A": string.ascii_letters + string.digits,
    "U": string.ascii_uppercase + string.digits,
    "L": string.ascii_lowercase,
    "l": string.ascii_letters,
    "u": string.ascii_letters + string.digits + "-_",
    "b": string.ascii_letters + string.digits + "+/",
    "2": string.ascii_uppercase + "234567",  # RFC 4648 base32
    "c": "qpzry9x8gf2tvdw0s3jn54khce6mua7l".upper(),  # bech32, as age writes it
}
_FIELD = re.compile(r"\{([A-Za-z2])(\d+)\}")

# How a value is set in its contexts: `key` as an assignment (KEY=value, key: value, "key": "value"),
# `url` inside a URL's user info, `curl` as `curl -u`, `header` as an Authorization header,
# `sigv4` as SigV4's Credential=, `block` as a key block with no END line (alone in its string).
KEY, URL, CURL, HEADER, SIGV4, BLOCK = "key", "url", "curl", "header", "sigv4", "block"


@dataclass(frozen=True)
class CredentialKind:
    kind: str  # the scanner's rule id, or the contract's name for the shape
    name: str  # the variable (and key, header, word) it is planted under
    format: str
    form: str = KEY

    def value(self, rng: random.Random) -> str:
        return _FIELD.sub(lambda m: "".join(rng.choice(ALPHABETS[m[1]]) for _ in range(int(m[2]))), self.format)


def _kinds(table: str, form: str = KEY) -> list[CredentialKind]:
    rows = [line.split() for line in table.strip().splitlines() if line.strip()]
    return [CredentialKind(kind, name, fmt, form) for kind, name, fmt in rows]


# gitleaks' default rules (config/gitleaks.toml), by rule id: the provider's token format
GITLEAKS = _kinds("""
1password-secret-key                 OP_SECRET_KEY               A3-{U6}-{U11}-{U5}-{U5}-{U5}
1password-service-account-token      OP_SERVICE_ACCOUNT_TOKEN    ops_eyJ{b260}
adafruit-api-key                     ADAFRUIT_IO_KEY             aio_{A28}
adobe-client-id                      ADOBE_CLIENT_ID             {h32}
adobe-client-secret                  ADOBE_CLIENT_SECRET         p8e-{A32}
age-secret-key                       AGE_SECRET_KEY              AGE-SECRET-KEY-1{c58}
airtable-api-key                     AIRTABLE_API_KEY            key{A14}
algolia-api-key                      ALGOLIA_API_KEY             {h32}
alibaba-access-key-id                ALIBABA_ACCESS_KEY_ID       LTAI{A20}
alibaba-secret-key                   ALIBABA_SECRET_KEY          {A30}
anthropic-admin-api-key              ANTHROPIC_ADMIN_KEY         sk-ant-admin01-{u93}AA
anthropic-api-key                    ANTHROPIC_API_KEY           sk-ant-api03-{u93}AA
artifactory-api-key                  ARTIFACTORY_API_KEY         AKCp{A69}
artifactory-reference-token          ARTIFACTORY_TOKEN           cmVmd{A59}
asana-client-id                      ASANA_CLIENT_ID             {d16}
asana-client-secret                  ASANA_CLIENT_SECRET         {a32}
atlassian-api-token                  ATLASSIAN_API_TOKEN         ATATT3{u186}
authress-service-client-access-key   AUTHRESS_ACCESS_KEY         sc_{a12}.{a5}.acc_{a16}.{b48}
aws-access-token                     AWS_ACCESS_KEY_ID           AKIA{216}
azure-ad-client-secret               AZURE_CLIENT_SECRET         {A3}8Q~{A34}
beamer-api-token                     BEAMER_API_KEY              b_{u44}
bitbucket-client-id                  BITBUCKET_CLIENT_ID         {a32}
bitbucket-client-secret              BITBUCKET_CLIENT_SECRET     {u64}
bittrex-access-key                   BITTREX_ACCESS_KEY          {a32}
bittrex-secret-key                   BITTREX_SECRET_KEY          {a32}
cisco-meraki-api-key                 MERAKI_API_KEY              {h40}
clickhouse-cloud-api-secret-key      CLICKHOUSE_SECRET_KEY       4b1d{A38}
clojars-api-token                    CLOJARS_TOKEN               CLOJARS_{a60}
cloudflare-api-key                   CLOUDFLARE_API_TOKEN        {u40}
cloudflare-global-api-key            CLOUDFLARE_GLOBAL_API_KEY   {h37}
cloudflare-origin-ca-key             CLOUDFLARE_ORIGIN_CA_KEY    v1.0-{h24}-{h146}
codecov-access-token                 CODECOV_TOKEN               {a32}
cohere-api-token                     CO_API_KEY                  {A40}
coinbase-access-token                COINBASE_ACCESS_TOKEN       {u64}
confluent-access-token               CONFLUENT_API_KEY           {U16}
confluent-secret-key                 CONFLUENT_SECRET            {A64}
contentful-delivery-api-token        CONTENTFUL_DELIVERY_TOKEN   {u43}
curl-auth-header                     CURL_AUTH_TOKEN             {u40}
curl-auth-user                       CURL_USER_PASSWORD          {A20}
databricks-api-token                 DATABRICKS_TOKEN            dapi{h32}
datadog-access-token                 DATADOG_API_KEY             {a40}
defined-networking-api-token         DNKEY_API_TOKEN             dnkey-{u26}-{u52}
digitalocean-access-token            DIGITALOCEAN_OAUTH_TOKEN    doo_v1_{h64}
digitalocean-pat                     DIGITALOCEAN_TOKEN          dop_v1_{h64}
digitalocean-refresh-token           DIGITALOCEAN_REFRESH_TOKEN  dor_v1_{h64}
discord-api-token                    DISCORD_API_KEY             {h64}
discord-client-id                    DISCORD_CLIENT_ID           {d18}
discord-client-secret                DISCORD_CLIENT_SECRET       {u32}
doppler-api-token                    DOPPLER_TOKEN               dp.pt.{A43}
droneci-access-token                 DRONECI_TOKEN               {A32}
dropbox-api-token                    DROPBOX_APP_SECRET          {a15}
dropbox-long-lived-api-token         DROPBOX_LONG_LIVED_TOKEN    {a11}AAAAAAAAAA{u43}
dropbox-short-lived-api-token        DROPBOX_ACCESS_TOKEN        sl.{u135}
duffel-api-token                     DUFFEL_TOKEN                duffel_test_{u43}
dynatrace-api-token                  DYNATRACE_API_TOKEN         dt0c01.{U24}.{U64}
easypost-api-token                   EASYPOST_API_KEY            EZAK{A54}
easypost-test-api-token              EASYPOST_TEST_API_KEY       EZTK{A54}
etsy-access-token                    ETSY_ACCESS_TOKEN           {a24}
facebook-access-token                FACEBOOK_ACCESS_TOKEN       {d15}|{u32}
facebook-page-access-token           FACEBOOK_PAGE_TOKEN         EAAC{A120}
facebook-secret                      FACEBOOK_APP_SECRET         {h32}
fastly-api-token                     FASTLY_API_TOKEN            {u32}
finicity-api-token                   FINICITY_APP_KEY            {h32}
finicity-client-secret               FINICITY_SECRET             {A20}
finnhub-access-token                 FINNHUB_TOKEN               {a20}
flickr-access-token                  FLICKR_API_KEY              {a32}
flutterwave-encryption-key           FLW_ENCRYPTION_KEY          FLWSECK_TEST{h12}
flutterwave-public-key               FLW_PUBLIC_KEY              FLWPUBK_TEST-{h32}-X
flutterwave-secret-key               FLW_SECRET_KEY              FLWSECK_TEST-{h32}-X
flyio-access-token                   FLY_API_TOKEN               fo1_{u43}
frameio-api-token                    FRAMEIO_TOKEN               fio-u-{u64}
freemius-secret-key                  FREEMIUS_SECRET_KEY         sk_{A29}
freshbooks-access-token              FRESHBOOKS_ACCESS_TOKEN     {a64}
gcp-api-key                          GOOGLE_API_KEY              AIza{u35}
generic-api-key                      SERVICE_API_KEY             {A12}-{A12}-{A12}
github-app-token                     GITHUB_APP_TOKEN            ghs_{A36}
github-fine-grained-pat              GITHUB_FINE_GRAINED_PAT     github_pat_11{U20}_{A59}
github-oauth                         GITHUB_OAUTH_TOKEN          gho_{A36}
github-pat                           GITHUB_TOKEN                ghp_{A36}
github-refresh-token                 GITHUB_REFRESH_TOKEN        ghr_{A36}
gitlab-cicd-job-token                CI_JOB_TOKEN                glcbt-{A4}_{u20}
gitlab-deploy-token                  GITLAB_DEPLOY_TOKEN         gldt-{u20}
gitlab-feature-flag-client-token     GITLAB_FEATURE_FLAGS_TOKEN  glffct-{u20}
gitlab-feed-token                    GITLAB_FEED_TOKEN           glft-{u20}
gitlab-incoming-mail-token           GITLAB_INCOMING_MAIL_TOKEN  glimt-{u25}
gitlab-kubernetes-agent-token        GITLAB_AGENT_TOKEN          glagent-{u50}
gitlab-oauth-app-secret              GITLAB_OAUTH_SECRET         gloas-{u64}
gitlab-pat                           GITLAB_TOKEN                glpat-{u20}
gitlab-pat-routable                  GITLAB_ROUTABLE_TOKEN       glpat-{u36}.01.{a7}
gitlab-ptt                           GITLAB_TRIGGER_TOKEN        glptt-{h40}
gitlab-rrt                           GITLAB_RUNNER_REG_TOKEN     GR1348941{u20}
gitlab-runner-authentication-token   GITLAB_RUNNER_TOKEN         glrt-{u20}
gitlab-runner-authentication-token-routable GITLAB_RUNNER_ROUTABLE_TOKEN glrt-t1_{u36}.01.{a7}
gitlab-scim-token                    GITLAB_SCIM_TOKEN           glsoat-{u20}
gitlab-session-cookie                GITLAB_SESSION_COOKIE       _gitlab_session={a32}
gitter-access-token                  GITTER_TOKEN                {a40}
gocardless-api-token                 GOCARDLESS_TOKEN            live_{u40}
grafana-api-key                      GRAFANA_API_KEY             eyJrIjoi{A80}
grafana-cloud-api-token              GRAFANA_CLOUD_TOKEN         glc_{b80}
grafana-service-account-token        GRAFANA_SA_TOKEN            glsa_{A32}_{h8}
harness-api-key                      HARNESS_PAT                 pat.{u22}.{A24}.{A20}
hashicorp-tf-api-token               TF_API_TOKEN                {a14}.atlasv1.{u67}
hashicorp-tf-password                TF_ADMIN_PASSWORD           {u16}
heroku-api-key                       HEROKU_API_KEY              {h8}-{h4}-{h4}-{h4}-{h12}
heroku-api-key-v2                    HEROKU_API_KEY_V2           HRKU-AA{u58}
hubspot-api-key                      HUBSPOT_API_KEY             {H8}-{H4}-{H4}-{H4}-{H12}
huggingface-access-token             HF_TOKEN                    hf_{l34}
huggingface-organization-api-token   HF_ORG_TOKEN                api_org_{l34}
infracost-api-token                  INFRACOST_API_KEY           ico-{A32}
intercom-api-key                     INTERCOM_TOKEN              {u60}
intra42-client-secret                INTRA42_CLIENT_SECRET       s-s4t2ud-{h64}
jfrog-api-key                        JFROG_API_KEY               {a73}
jfrog-identity-token                 JFROG_IDENTITY_TOKEN        {a64}
jwt                                  SESSION_JWT                 eyJhbGciOiJIUzI1NiJ9.eyJ{A40}.{u43}
jwt-base64                           ENCODED_JWT                 ZXlKaGJHY2lPaU{A80}
kraken-access-token                  KRAKEN_API_KEY              {b84}
kubernetes-secret-yaml               KUBE_SECRET_DATA            {b40}
kucoin-access-token                  KUCOIN_API_KEY              {h24}
kucoin-secret-key                    KUCOIN_API_SECRET           {h8}-{h4}-{h4}-{h4}-{h12}
launchdarkly-access-token            LAUNCHDARKLY_ACCESS_TOKEN   api-{h8}-{h4}-{h4}-{h4}-{h12}
linear-api-key                       LINEAR_API_KEY              lin_api_{A40}
linear-client-secret                 LINEAR_CLIENT_SECRET        {h32}
linkedin-client-id                   LINKEDIN_CLIENT_ID          {a14}
linkedin-client-secret               LINKEDIN_CLIENT_SECRET      {A16}
lob-api-key                          LOB_API_KEY                 live_{h35}
lob-pub-api-key                      LOB_PUBLISHABLE_KEY         live_pub_{h31}
mailchimp-api-key                    MAILCHIMP_API_KEY           {h32}-us{d2}
mailgun-private-api-token            MAILGUN_API_KEY             key-{h32}
mailgun-pub-key                      MAILGUN_PUBLIC_KEY          pubkey-{h32}
mailgun-signing-key                  MAILGUN_SIGNING_KEY         {h32}-{h8}-{h8}
mapbox-api-token                     MAPBOX_TOKEN                pk.{a60}.{a22}
mattermost-access-token              MATTERMOST_TOKEN            {a26}
maxmind-license-key                  MAXMIND_LICENSE_KEY         {A6}_{A29}_mmk
messagebird-api-token                MESSAGEBIRD_API_KEY         {a25}
messagebird-client-id                MESSAGEBIRD_CLIENT_ID       {h8}-{h4}-{h4}-{h4}-{h12}
microsoft-teams-webhook              TEAMS_WEBHOOK_URL           https://acme.webhook.office.com/webhookb2/{h8}-{h4}-{h4}-{h4}-{h12}@{h8}-{h4}-{h4}-{h4}-{h12}/IncomingWebhook/{h32}/{h8}-{h4}-{h4}-{h4}-{h12}
netlify-access-token                 NETLIFY_AUTH_TOKEN          nfp_{A40}
new-relic-browser-api-token          NEW_RELIC_BROWSER_KEY       NRJS-{h19}
new-relic-insert-key                 NEW_RELIC_INSERT_KEY        NRII-{u32}
new-relic-user-api-id                NEW_RELIC_USER_ID           {a64}
new-relic-user-api-key               NEW_RELIC_API_KEY           NRAK-{U27}
notion-api-token                     NOTION_TOKEN                ntn_{d11}{A35}
npm-access-token                     NPM_TOKEN                   npm_{A36}
nuget-config-password                NUGET_PASSWORD              {A16}
nytimes-access-token                 NYTIMES_API_KEY             {A32}
octopus-deploy-api-key               OCTOPUS_API_KEY             API-{U26}
okta-access-token                    OKTA_API_TOKEN              00{u40}
openai-api-key                       OPENAI_API_KEY              sk-proj-{u74}T3BlbkFJ{u74}
openshift-user-token                 OPENSHIFT_TOKEN             sha256~{u43}
perplexity-api-key                   PERPLEXITY_API_KEY          pplx-{A48}
pkcs12-file                          PKCS12_PASSWORD             {A20}
plaid-api-token                      PLAID_ACCESS_TOKEN          access-sandbox-{h8}-{h4}-{h4}-{h4}-{h12}
plaid-client-id                      PLAID_CLIENT_ID             {h24}
plaid-secret-key                     PLAID_SECRET                {h30}
planetscale-api-token                PLANETSCALE_TOKEN           pscale_tkn_{u43}
planetscale-oauth-token              PLANETSCALE_OAUTH_TOKEN     pscale_oauth_{u43}
planetscale-password                 PLANETSCALE_PASSWORD        pscale_pw_{u43}
postman-api-token                    POSTMAN_API_KEY             PMAK-{h24}-{h34}
prefect-api-token                    PREFECT_API_KEY             pnu_{A36}
privateai-api-token                  PRIVATE_AI_API_KEY          {a32}
pulumi-api-token                     PULUMI_ACCESS_TOKEN         pul-{h40}
pypi-upload-token                    PYPI_TOKEN                  pypi-AgEIcHlwaS5vcmc{u70}
rapidapi-access-token                RAPIDAPI_KEY                {u50}
readme-api-token                     README_API_KEY              rdme_{a70}
rubygems-api-token                   GEM_HOST_API_KEY            rubygems_{h48}
scalingo-api-token                   SCALINGO_API_TOKEN          tk-us-{u48}
sendbird-access-id                   SENDBIRD_APP_ID             {H8}-{H4}-{H4}-{H4}-{H12}
sendbird-access-token                SENDBIRD_API_TOKEN          {h40}
sendgrid-api-token                   SENDGRID_API_KEY            SG.{u22}.{u43}
sendinblue-api-token                 SENDINBLUE_API_KEY          xkeysib-{h64}-{A16}
sentry-access-token                  SENTRY_AUTH_TOKEN           {h64}
sentry-org-token                     SENTRY_ORG_TOKEN            sntrys_eyJpYXQiOjE3OTAwMDAwMDAuMCwidXJsIjoiaHR0cHM6Ly9zZW50cnkuaW8iLCJyZWdpb25fdXJsIjoiaHR0cHM6Ly91cy5zZW50cnkuaW8iLCJvcmciOiJhY21lIn0_{b43}
sentry-user-token                    SENTRY_USER_TOKEN           sntryu_{h64}
settlemint-application-access-token  SETTLEMINT_APP_TOKEN        sm_aat_{A16}
settlemint-personal-access-token     SETTLEMINT_PAT              sm_pat_{A16}
settlemint-service-access-token      SETTLEMINT_SERVICE_TOKEN    sm_sat_{A16}
shippo-api-token                     SHIPPO_API_TOKEN            shippo_live_{h40}
shopify-access-token                 SHOPIFY_ACCESS_TOKEN        shpat_{h32}
shopify-custom-access-token          SHOPIFY_CUSTOM_TOKEN        shpca_{h32}
shopify-private-app-access-token     SHOPIFY_PRIVATE_APP_TOKEN   shppa_{h32}
shopify-shared-secret                SHOPIFY_SHARED_SECRET       shpss_{h32}
sidekiq-secret                       BUNDLE_ENTERPRISE__CONTRIBSYS__COM {h8}:{h8}
sidekiq-sensitive-url                SIDEKIQ_GEMS_URL            https://{h8}:{h8}@gems.contribsys.com/
slack-app-token                      SLACK_APP_TOKEN             xapp-1-A{U10}-{d13}-{h64}
slack-bot-token                      SLACK_BOT_TOKEN             xoxb-{d12}-{d13}-{A24}
slack-config-access-token            SLACK_CONFIG_TOKEN          xoxe.xoxp-1-{U164}
slack-config-refresh-token           SLACK_CONFIG_REFRESH_TOKEN  xoxe-1-{U146}
slack-legacy-bot-token               SLACK_LEGACY_BOT_TOKEN      xoxb-{d10}-{A24}
slack-legacy-token                   SLACK_LEGACY_TOKEN          xoxs-{d10}-{d10}-{d12}-{h64}
slack-legacy-workspace-token         SLACK_WORKSPACE_TOKEN       xoxa-2-{A40}
slack-user-token                     SLACK_USER_TOKEN            xoxp-{d12}-{d12}-{d12}-{h32}
slack-webhook-url                    SLACK_WEBHOOK_URL           https://hooks.slack.com/services/T{U10}/B{U10}/{A24}
snyk-api-token                       SNYK_TOKEN                  {h8}-{h4}-{h4}-{h4}-{h12}
sonar-api-token                      SONAR_TOKEN                 squ_{h40}
sourcegraph-access-token             SRC_ACCESS_TOKEN            sgp_{h16}_{h40}
square-access-token                  SQUARE_ACCESS_TOKEN         EAAA{u60}
squarespace-access-token             SQUARESPACE_API_KEY         {h8}-{h4}-{h4}-{h4}-{h12}
stripe-access-token                  STRIPE_SECRET_KEY           sk_live_{A99}
sumologic-access-id                  SUMO_ACCESS_ID              su{A12}
sumologic-access-token               SUMO_ACCESS_KEY             {A64}
telegram-bot-api-token               TELEGRAM_BOT_TOKEN          {d10}:AA{u33}
travisci-access-token                TRAVIS_TOKEN                {A22}
twilio-api-key                       TWILIO_API_KEY              SK{h32}
twitch-api-token                     TWITCH_CLIENT_SECRET        {a30}
twitter-access-secret                TWITTER_ACCESS_SECRET       {A45}
twitter-access-token                 TWITTER_ACCESS_TOKEN        {d19}-{A40}
twitter-api-key                      TWITTER_API_KEY             {A25}
twitter-api-secret                   TWITTER_API_SECRET          {A50}
twitter-bearer-token                 TWITTER_BEARER_TOKEN        AAAAAAAAAAAAAAAAAAAAA{A90}
typeform-api-token                   TYPEFORM_TOKEN              tfp_{u59}
vault-batch-token                    VAULT_BATCH_TOKEN           hvb.{u150}
vault-service-token                  VAULT_TOKEN                 hvs.{u95}
yandex-access-token                  YANDEX_OAUTH_TOKEN          t1.{u40}.{u86}
yandex-api-key                       YANDEX_API_KEY              AQVN{u38}
yandex-aws-access-token              YANDEX_STATIC_KEY_ID        YC{u38}
zendesk-secret-key                   ZENDESK_API_TOKEN           {A40}
""")

# common trufflehog detectors beyond those rules, and the AWS key id forms
TRUFFLEHOG = _kinds("""
gitlab-pat-legacy                    GITLAB_LEGACY_TOKEN         glpat-{u20}
stripe-restricted-key                STRIPE_RESTRICTED_KEY       rk_live_{A99}
stripe-test-key                      STRIPE_TEST_KEY             sk_test_{A99}
sendgrid-api-key                     SENDGRID_KEY                SG.{u22}.{u43}
google-oauth-client-secret           GOOGLE_CLIENT_SECRET        GOCSPX-{u28}
google-service-account-key-id        GOOGLE_SA_PRIVATE_KEY_ID    {h40}
npm-token-legacy                     NPM_AUTH_TOKEN              npm_{A36}
pypi-token                           TWINE_PASSWORD              pypi-AgEIcHlwaS5vcmc{u90}
dockerhub-pat                        DOCKERHUB_TOKEN             dckr_pat_{u27}
azure-storage-account-key            AZURE_STORAGE_KEY           {b86}==
azure-sas-token                      AZURE_SAS_SIGNATURE         {b43}=
azure-openai-key                     AZURE_OPENAI_API_KEY        {h32}
twilio-account-sid                   TWILIO_AUTH_TOKEN           {h32}
shopify-app-secret                   SHOPIFY_API_SECRET          shpss_{h32}
digitalocean-spaces-secret           DO_SPACES_SECRET            {b43}
databricks-pat                       DATABRICKS_PAT              dapi{h32}-2
mailgun-api-key                      MAILGUN_PRIVATE_KEY         {h32}-{h8}-{h8}
telegram-bot-token                   BOT_TOKEN                   {d9}:AA{u33}
discord-bot-token                    DISCORD_BOT_TOKEN           M{A23}.{u6}.{u38}
discord-webhook-url                  DISCORD_WEBHOOK_URL         https://discord.com/api/webhooks/{d18}/{u68}
slack-app-level-token                SLACK_SOCKET_TOKEN          xapp-1-A{U10}-{d13}-{h64}
slack-webhook                        SLACK_INCOMING_WEBHOOK      https://hooks.slack.com/workflows/T{U10}/A{U10}/{d18}/{A24}
huggingface-org-token                HF_ORG_API_TOKEN            api_org_{l34}
aws-abia-key-id                      AWS_BILLING_KEY_ID          ABIA{216}
aws-acca-key-id                      AWS_CONTEXT_KEY_ID          ACCA{216}
aws-asia-key-id                      AWS_SESSION_KEY_ID          ASIA{216}
aws-secret-access-key                AWS_SECRET_ACCESS_KEY       {b40}
openai-service-account-key           OPENAI_SVCACCT_KEY          sk-svcacct-{u74}T3BlbkFJ{u74}
github-app-installation-long         GITHUB_INSTALLATION_TOKEN   ghs_{A120}
""")

# the shapes contract 3 names on its own: secret-named assignments, passwords in URLs, curl -u,
# Basic and token headers, SigV4 key ids, a key block with no END line
SHAPES = [
    CredentialKind("assignment-password", "password", "{A18}"),
    CredentialKind("assignment-passwd", "passwd", "{A14}"),
    CredentialKind("assignment-secret", "secret", "{A24}"),
    CredentialKind("assignment-token", "token", "{A32}"),
    CredentialKind("assignment-api-key", "api_key", "{A28}"),
    CredentialKind("assignment-access-key", "access_key", "{A22}"),
    CredentialKind("assignment-client-secret", "client_secret", "{u30}"),
    CredentialKind("assignment-private-key", "private_key", "{b44}"),
    CredentialKind("url-password", "postgres", "{A16}", URL),
    CredentialKind("curl-user-password", "deploy", "{A16}", CURL),
    CredentialKind("authorization-basic", "Basic", "", HEADER),
    CredentialKind("authorization-token", "token", "{A40}", HEADER),
    CredentialKind("sigv4-credential", "Credential", "AKIA{216}", SIGV4),
    CredentialKind("private-key", "RSA", "end", BLOCK),
    CredentialKind("private-key-no-end", "OPENSSH", "", BLOCK),
]

KINDS: tuple[CredentialKind, ...] = (*GITLEAKS, *TRUFFLEHOG, *SHAPES)


def planted_value(kind: CredentialKind, rng: random.Random) -> str:
    """One fresh value of `kind` (the value a test must not find again: the secret part only)."""
    if kind.form == HEADER and kind.name == "Basic":
        user = "".join(rng.choice(string.ascii_lowercase) for _ in range(6))
        password = "".join(rng.choice(ALPHABETS["A"]) for _ in range(18))
        return base64.b64encode(f"{user}:{password}".encode()).decode()
    if kind.form == BLOCK:  # `format` "end": with its END line
        body = base64.b64encode(rng.randbytes(300)).decode()
        lines = "\n".join(body[i : i + 70] for i in range(0, len(body), 70))
        end = f"\n-----END {kind.name} PRIVATE KEY-----" if kind.format == "end" else ""
        return f"-----BEGIN {kind.name} PRIVATE KEY-----\n{lines}{end}"
    return kind.value(rng)
