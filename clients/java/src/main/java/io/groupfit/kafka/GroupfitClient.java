package io.groupfit.kafka;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * The calls the assignors make, over {@code java.net.http}: the group's stored rates and state, POST /v1/assign
 * and the scaling decision (GET /v1/groups/{group}/scale, the leader's reassignment check). Asynchronous, so a
 * caller can bound how long it waits (and keep a late answer) independently of the request.
 */
public class GroupfitClient {
    static final ObjectMapper JSON =
            JsonMapper.builder().disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES).build();

    private final String baseUrl;
    private final String token;
    private final HttpClient http;

    public GroupfitClient(String baseUrl, String token, Duration connectTimeout) {
        this.baseUrl = baseUrl.replaceAll("/+$", "");
        this.token = token == null || token.isEmpty() ? null : token;
        // HTTP/1.1: the service speaks it; HTTP/2 would first try an upgrade on every new connection.
        this.http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(connectTimeout)
                .build();
    }

    public String baseUrl() {
        return baseUrl;
    }

    public CompletableFuture<Api.StoredRates> rates(String group, Duration timeout) {
        String path = "/v1/groups/" + URLEncoder.encode(group, StandardCharsets.UTF_8) + "/rates";
        return send(request(path, timeout).GET().build(), Api.StoredRates.class);
    }

    public CompletableFuture<Api.GroupState> group(String group, Duration timeout) {
        String path = "/v1/groups/" + URLEncoder.encode(group, StandardCharsets.UTF_8);
        return send(request(path, timeout).GET().build(), Api.GroupState.class);
    }

    /** GET /v1/groups/{group}/scale with `query` (parameter → value; each value sent URL-encoded). */
    public CompletableFuture<Api.ScaleSignal> scale(String group, Map<String, String> query, Duration timeout) {
        StringBuilder path = new StringBuilder("/v1/groups/" + URLEncoder.encode(group, StandardCharsets.UTF_8) + "/scale");
        char separator = '?';
        for (Map.Entry<String, String> parameter : query.entrySet()) {
            path.append(separator).append(parameter.getKey()).append('=')
                    .append(URLEncoder.encode(parameter.getValue(), StandardCharsets.UTF_8));
            separator = '&';
        }
        return send(request(path.toString(), timeout).GET().build(), Api.ScaleSignal.class);
    }

    public CompletableFuture<Api.AssignResponse> assign(Api.AssignRequest body, Duration timeout) {
        byte[] json;
        try {
            json = JSON.writeValueAsBytes(body);
        } catch (IOException e) {
            return CompletableFuture.failedFuture(e);
        }
        HttpRequest request = request("/v1/assign", timeout)
                .header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofByteArray(json))
                .build();
        return send(request, Api.AssignResponse.class);
    }

    private HttpRequest.Builder request(String path, Duration timeout) {
        HttpRequest.Builder builder = HttpRequest.newBuilder(URI.create(baseUrl + path)).timeout(timeout);
        if (token != null) {
            builder.header("authorization", "Bearer " + token);
        }
        return builder;
    }

    private <T> CompletableFuture<T> send(HttpRequest request, Class<T> type) {
        return http.sendAsync(request, HttpResponse.BodyHandlers.ofByteArray()).thenApply(response -> {
            try {
                if (response.statusCode() / 100 == 2) {
                    return JSON.readValue(response.body(), type);
                }
                Api.ErrorResponse error = JSON.readValue(response.body(), Api.ErrorResponse.class);
                throw new GroupfitException(response.statusCode(), error.error().code(), error.error().message());
            } catch (IOException e) {
                throw new CompletionException(new GroupfitException(
                        response.statusCode(), "unreadable_answer", "the answer is not the expected JSON: " + e));
            }
        });
    }
}
