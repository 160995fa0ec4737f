package dev.glimmer.server.webchat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import org.openqa.selenium.By;
import org.openqa.selenium.Dimension;
import org.openqa.selenium.ElementNotInteractableException;
import org.openqa.selenium.JavascriptExecutor;
import org.openqa.selenium.Keys;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.logging.LogEntry;
import org.openqa.selenium.logging.LogType;
import org.openqa.selenium.support.ui.WebDriverWait;

/** The web chat as a test sees it: what a user can do on the page and what it shows. */
final class ChatPage {
    static final Dimension DESKTOP = new Dimension(1280, 860);
    static final Dimension PHONE = new Dimension(390, 844);

    private final ChromeDriver driver;
    private final String url;
    private final String modelId;

    /** @param modelId the model id the page shows once it has read {@code /v1/models} */
    ChatPage(ChromeDriver driver, String url, String modelId) {
        this.driver = driver;
        this.url = url;
        this.modelId = modelId;
    }

    /** Opens the page with no conversations and the given settings (the page's localStorage JSON). */
    void openFresh(String settingsJson) {
        openFresh(settingsJson, modelId);
    }

    /** {@link #openFresh(String)}, waiting until the model pill says {@code pill} (the model id once it is known). */
    void openFresh(String settingsJson, String pill) {
        driver.manage().window().setSize(DESKTOP);
        colorScheme("light");
        driver.get(url);
        js("localStorage.clear(); localStorage.setItem('glimmer.settings', arguments[0]);", settingsJson);
        driver.navigate().refresh();
        awaitPill(pill, Duration.ofSeconds(15));
    }

    void reload() {
        driver.navigate().refresh();
        awaitPill(modelId, Duration.ofSeconds(15));
    }

    /** Waits until the model pill's name says {@code text}. */
    void awaitPill(String text, Duration timeout) {
        waitUntil(timeout, () -> text(By.id("model-name")).equals(text));
    }

    /** The element's box in CSS pixels: {@code [top, bottom, height]}. */
    List<Number> box(By by) {
        @SuppressWarnings("unchecked")
        List<Number> box = (List<Number>) js(
                "const r = arguments[0].getBoundingClientRect(); return [r.top, r.bottom, r.height];",
                driver.findElement(by));
        return box;
    }

    void setThinking(boolean on) {
        WebElement box = driver.findElement(By.id("thinking-toggle"));
        if (box.isSelected() != on) {
            // The checkbox is visually replaced by a switch: click its label as a user would.
            driver.findElement(By.cssSelector("label.toggle")).click();
        }
        waitUntil(Duration.ofSeconds(2), () -> box.isSelected() == on);
    }

    /** Types the message and presses Enter. */
    void send(String message) {
        WebElement prompt = driver.findElement(By.id("prompt"));
        prompt.sendKeys(message);
        prompt.sendKeys(Keys.ENTER);
    }

    /**
     * Records the length of the last answer's text each time the page changes it, with the time,
     * into {@code window.answerGrowth} ([[ms, length], ...]); call before {@link #send}.
     */
    void recordAnswerGrowth() {
        js("""
                window.answerGrowth = [];
                const start = performance.now();
                new MutationObserver(() => {
                  const answers = document.querySelectorAll('.message.assistant .answer');
                  const last = answers[answers.length - 1];
                  if (last) window.answerGrowth.push([performance.now() - start, last.textContent.length]);
                }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
                """);
    }

    @SuppressWarnings("unchecked")
    List<List<Number>> answerGrowth() {
        return (List<List<Number>>) js("return window.answerGrowth;");
    }

    boolean generating() {
        return driver.findElement(By.id("stop")).isDisplayed();
    }

    /** Waits until no answer is being generated. */
    void awaitIdle(Duration timeout) {
        waitUntil(
                timeout,
                () -> !generating()
                        && driver.findElements(By.cssSelector(".message.pending"))
                                .isEmpty());
    }

    void awaitVisible(By by, Duration timeout) {
        waitUntil(timeout, () -> visible(by));
    }

    /** Waits until the last answer shows at least {@code chars} characters. */
    void awaitAnswerLength(int chars, Duration timeout) {
        waitUntil(timeout, () -> lastAnswerText().length() >= chars);
    }

    void click(By by) {
        driver.findElement(by).click();
    }

    /** Replaces the last user message with {@code text} through its edit button and sends it. */
    void editLastUserMessage(String text) {
        List<WebElement> edits = driver.findElements(By.cssSelector(".message.user .action.edit"));
        edits.getLast().click();
        WebElement editor = driver.findElement(By.cssSelector(".editor .edit-text"));
        editor.clear();
        editor.sendKeys(text);
        driver.findElement(By.cssSelector(".editor .primary")).click();
    }

    int assistantMessages() {
        return driver.findElements(By.cssSelector(".message.assistant")).size();
    }

    void clickStop() {
        driver.findElement(By.id("stop")).click();
    }

    /**
     * Presses Stop unless the answer has already ended: a short answer can end between looking and clicking,
     * and then the hidden button is not clickable. That race is no failure; a press refused while the answer
     * is still being generated is.
     */
    void stopIfGenerating() {
        try {
            if (generating()) {
                clickStop();
            }
        } catch (ElementNotInteractableException e) { // also a click intercepted by what lies under the hidden button
            if (generating()) {
                throw e;
            }
        }
    }

    WebElement lastAssistant() {
        List<WebElement> all = driver.findElements(By.cssSelector(".message.assistant"));
        return all.getLast();
    }

    String lastAnswerText() {
        List<WebElement> all = driver.findElements(By.cssSelector(".message.assistant .answer"));
        return all.isEmpty() ? "" : (String) js("return arguments[0].textContent;", all.getLast());
    }

    List<String> userMessages() {
        return driver.findElements(By.cssSelector(".message.user .bubble")).stream()
                .map(WebElement::getText)
                .toList();
    }

    List<String> conversationTitles() {
        return driver.findElements(By.cssSelector(".conversation-open")).stream()
                .map(WebElement::getText)
                .toList();
    }

    String text(By by) {
        return driver.findElement(by).getText();
    }

    boolean visible(By by) {
        List<WebElement> found = driver.findElements(by);
        return !found.isEmpty() && found.getFirst().isDisplayed();
    }

    /** Opens the settings dialog from the sidebar (opening the drawer first at phone width). */
    void openSettings() {
        WebElement button = driver.findElement(By.id("open-settings"));
        if (button.getRect().getX() < 0) {
            openSidebar();
        }
        button.click();
        waitUntil(Duration.ofSeconds(3), () -> visible(By.id("settings")));
    }

    /** Types a max tokens value into the open settings dialog and saves. */
    void setMaxTokensInSettings(int maxTokens) {
        WebElement field = driver.findElement(By.id("set-max-tokens"));
        field.clear();
        field.sendKeys(Integer.toString(maxTokens));
        driver.findElement(By.id("settings-save")).click();
        waitUntil(Duration.ofSeconds(3), () -> !visible(By.id("settings")));
    }

    String value(By by) {
        return driver.findElement(by).getDomProperty("value");
    }

    void openSidebar() {
        driver.findElement(By.id("open-sidebar")).click();
        waitUntil(
                Duration.ofSeconds(3),
                () -> driver.findElement(By.id("new-chat")).getRect().getX() >= 0);
    }

    /** Makes the page see the system's colour scheme as {@code light} or {@code dark}. */
    void colorScheme(String scheme) {
        driver.executeCdpCommand(
                "Emulation.setEmulatedMedia",
                Map.of("features", List.of(Map.of("name", "prefers-color-scheme", "value", scheme))));
    }

    /** Puts text in the message box at once (typing thousands of characters key by key is slow) and sends it. */
    void sendPasted(String message) {
        WebElement prompt = driver.findElement(By.id("prompt"));
        js("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));", prompt, message);
        prompt.sendKeys(Keys.ENTER);
    }

    void phoneWidth() {
        driver.manage().window().setSize(PHONE);
    }

    /** Browser console messages at error level since the last call. */
    List<String> consoleErrors() {
        return driver.manage().logs().get(LogType.BROWSER).getAll().stream()
                .filter(e -> e.getLevel().intValue() >= Level.SEVERE.intValue())
                .map(LogEntry::getMessage)
                .toList();
    }

    /** Saves what the browser shows as target/web-chat/NAME.png for a person to look at. */
    void screenshot(String name) throws IOException {
        Path dir = Files.createDirectories(Path.of("target", "web-chat"));
        Files.write(dir.resolve(name + ".png"), driver.getScreenshotAs(OutputType.BYTES));
    }

    Object js(String script, Object... args) {
        return ((JavascriptExecutor) driver).executeScript(script, args);
    }

    private void waitUntil(Duration timeout, java.util.function.BooleanSupplier condition) {
        new WebDriverWait(driver, timeout, Duration.ofMillis(25)).until(d -> condition.getAsBoolean());
    }
}
