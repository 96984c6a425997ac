import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;

/**
 * An OAUTHBEARER login callback handler that hands the client the token its JAAS entry names
 * (options token, principal, lifetimeMs):
 *
 *   sasl.login.callback.handler.class=StaticTokenLoginCallbackHandler
 *   sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
 *       token="JWT" principal="alice" lifetimeMs="3600000";
 *
 * Kafka's own unsecured login handler builds the JWT with Jackson, which kafka-clients does not
 * bundle; the tests make the unsecured JWT themselves, as they do for the other clients.
 */
public final class StaticTokenLoginCallbackHandler implements AuthenticateCallbackHandler {
    private Map<String, ?> options = Collections.emptyMap();

    @Override
    public void configure(Map<String, ?> configs, String saslMechanism, List<AppConfigurationEntry> jaasConfigEntries) {
        options = jaasConfigEntries.get(0).getOptions();
    }

    @Override
    public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
        for (Callback callback : callbacks) {
            if (!(callback instanceof OAuthBearerTokenCallback)) throw new UnsupportedCallbackException(callback);
            final String value = (String) options.get("token");
            final String principal = (String) options.get("principal");
            final long start = System.currentTimeMillis();
            final long lifetime = start + Long.parseLong(String.valueOf(options.get("lifetimeMs")));
            ((OAuthBearerTokenCallback) callback).token(new OAuthBearerToken() {
                @Override public String value() { return value; }
                @Override public Set<String> scope() { return Collections.emptySet(); }
                @Override public long lifetimeMs() { return lifetime; }
                @Override public String principalName() { return principal; }
                @Override public Long startTimeMs() { return start; }
            });
        }
    }

    @Override
    public void close() {
    }
}
