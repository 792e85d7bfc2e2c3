package io.groupfit.kafka;

/** groupfit answered an error ({@code code} from the API's closed set, e.g. group_not_found), or none at all. */
public class GroupfitException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int status;
    private final String code;

    public GroupfitException(int status, String code, String message) {
        super(code + " (HTTP " + status + "): " + message);
        this.status = status;
        this.code = code;
    }

    public int status() {
        return status;
    }

    public String code() {
        return code;
    }
}
